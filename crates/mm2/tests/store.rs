//! Offset translation (MM2 `OffsetSyncStore`): the vectors of mm2-formats.md, MM2's own
//! `OffsetSyncStoreTest` vectors, the history layout invariants and the precision bound.

use strait_mm2::{DownstreamOffset, OffsetSync, OffsetSyncStore, UpstreamOffset, SYNC_HISTORY_SLOTS};

const TOPIC: &str = "orders";
const PARTITION: i32 = 2;

fn sync(up: i64, down: i64) -> OffsetSync {
    OffsetSync {
        topic: TOPIC.into(),
        partition: PARTITION,
        upstream: UpstreamOffset(up),
        downstream: DownstreamOffset(down),
    }
}

fn translate(store: &OffsetSyncStore, group_offset: i64) -> Option<i64> {
    store.translate(TOPIC, PARTITION, UpstreamOffset(group_offset)).map(|d| d.0)
}

fn upstreams(store: &OffsetSyncStore) -> [i64; SYNC_HISTORY_SLOTS] {
    store.history(TOPIC, PARTITION).expect("partition has syncs").map(|(up, _)| up.0)
}

/// One step of a scripted scenario.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// `apply(sync(up, down))`.
    Sync(i64, i64),
    /// `mark_read_to_end()`.
    Start,
    /// `translate(g)` must return the given value.
    Translate(i64, Option<i64>),
}

fn run(script: &[Step]) {
    let mut store = OffsetSyncStore::new();
    for (i, step) in script.iter().enumerate() {
        match *step {
            Step::Sync(up, down) => store.apply(&sync(up, down)),
            Step::Start => store.mark_read_to_end(),
            Step::Translate(g, want) => {
                assert_eq!(translate(&store, g), want, "step {i}: {step:?}");
            }
        }
    }
}

/// Invariants A–D of the store (module docs), checked the way MM2's test does: pairs of slots
/// with the same upstream offset are skipped.
/// `oldest`: the expected slot 63 (invariant D), `None` to skip that check.
fn assert_invariants(store: &OffsetSyncStore, newest: i64, oldest: Option<i64>) {
    let ups = upstreams(store);
    assert_eq!(ups[0], newest, "A: slot 0 is the newest sync; {ups:?}");
    if let Some(oldest) = oldest {
        assert_eq!(ups[63], oldest, "D: slot 63 is the oldest usable sync; {ups:?}");
    }
    for j in 0..SYNC_HISTORY_SLOTS {
        for i in 0..j {
            let (ui, uj) = (i128::from(ups[i]), i128::from(ups[j]));
            if ui == uj {
                continue;
            }
            let max_i = uj + (1i128 << j) - (1i128 << i);
            assert!(ui <= max_i, "B({i},{j}): {ui} > {max_i}; {ups:?}");
            let min_i = uj + (1i128 << i.saturating_sub(2));
            assert!(ui >= min_i, "C({i},{j}): {ui} < {min_i}; {ups:?}");
        }
    }
}

#[test]
fn doc_vectors() {
    use Step::{Start, Sync, Translate};
    // mm2-formats.md, "Translating a group offset".
    run(&[
        Start,
        Sync(100, 200),
        Translate(150, Some(201)),
        Sync(150, 251),
        Translate(150, Some(251)),
        Translate(5, None),
        Sync(200, 10),
        Translate(200, Some(10)),
        // MM2 testOffsetTranslation continues with an upstream reset.
        Sync(20, 20),
        Translate(20, Some(20)),
        Translate(19, None),
        Translate(150, Some(21)),
    ]);
    run(&[
        Translate(0, None),
        Sync(100, 200),
        Translate(0, None),
        Translate(100, None),
        Translate(200, None),
        Start,
        Translate(0, None),
        Translate(100, Some(200)),
        Translate(200, Some(201)),
    ]);
}

#[test]
fn nothing_translates_before_read_to_end() {
    let mut store = OffsetSyncStore::default();
    assert!(!store.is_ready());
    for up in [0, 10, 20] {
        store.apply(&sync(up, up + 1000));
    }
    for g in [-1, 0, 10, 20, 21, i64::MAX] {
        assert_eq!(translate(&store, g), None, "g={g}");
    }
    store.mark_read_to_end();
    store.mark_read_to_end();
    assert!(store.is_ready());
    assert_eq!(translate(&store, 20), Some(1020));
}

#[test]
fn unknown_partitions_do_not_translate() {
    let mut store = OffsetSyncStore::new();
    store.mark_read_to_end();
    store.apply(&sync(5, 50));
    let other_partition = OffsetSync { partition: 3, ..sync(7, 70) };
    let other_topic = OffsetSync { topic: "payments".into(), ..sync(9, 90) };
    store.apply(&other_partition);
    store.apply(&other_topic);
    let cases = [
        ((TOPIC, PARTITION, 100), Some(51)),
        ((TOPIC, 3, 100), Some(71)),
        (("payments", PARTITION, 100), Some(91)),
        (("payments", 3, 100), None),
        (("nope", PARTITION, 100), None),
    ];
    for ((topic, partition, g), want) in cases {
        let got = store.translate(topic, partition, UpstreamOffset(g)).map(|d| d.0);
        assert_eq!(got, want, "{topic}-{partition} @ {g}");
    }
    assert!(store.history("payments", 3).is_none());
}

/// MM2 `OffsetSyncStoreTest.testPastOffsetTranslation`: syncs every 10 offsets, 0..=1000 during
/// the initial read, 1010..=10000 after it, then an upstream rewind.
#[test]
fn mm2_past_offset_translation() {
    let mut store = OffsetSyncStore::new();
    for off in (0..=1000).step_by(10) {
        store.apply(&sync(off, off));
        assert_invariants(&store, off, Some(off));
    }
    store.mark_read_to_end();
    // (sync offset, previous translatable sync or None): translate(s-1) = prev+1,
    // translate(s) = s, translate(s+1) = translate(s+2) = s+1.
    let initial: &[(i64, Option<i64>)] = &[(1000, None)];
    for &(s, prev) in initial {
        assert_sparse(&store, s, prev);
    }
    for off in (1010..=10000).step_by(10) {
        store.apply(&sync(off, off));
        assert_invariants(&store, off, Some(1000));
    }
    let table: &[(i64, Option<i64>)] = &[
        (1000, None),
        (4840, Some(1000)),
        (6760, Some(4840)),
        (8680, Some(6760)),
        (9160, Some(8680)),
        (9640, Some(9160)),
        (9880, Some(9640)),
        (9940, Some(9880)),
        (9970, Some(9940)),
        (9990, Some(9970)),
        (10000, Some(9990)),
    ];
    for &(s, prev) in table {
        assert_sparse(&store, s, prev);
    }

    store.apply(&sync(1500, 11000));
    assert_invariants(&store, 1500, Some(1500));
    let after_rewind = [(1499, None), (1500, Some(11000)), (2000, Some(11001))];
    for (g, want) in after_rewind {
        assert_eq!(translate(&store, g), want, "after rewind, g={g}");
    }
}

fn assert_sparse(store: &OffsetSyncStore, s: i64, prev: Option<i64>) {
    let cases = [(s - 1, prev.map(|p| p + 1)), (s, Some(s)), (s + 1, Some(s + 1)), (s + 2, Some(s + 1))];
    for (g, want) in cases {
        assert_eq!(translate(store, g), want, "sync {s}, g={g}");
    }
}

#[test]
fn rewind_clears_history_equal_upstream_does_not() {
    let mut store = OffsetSyncStore::new();
    store.mark_read_to_end();
    for up in 0..100 {
        store.apply(&sync(up, up + 1000));
    }
    let old = translate(&store, 10);
    assert_eq!(old, Some(1001), "old sync still reachable (slot 63)");

    // Same upstream as slot 0: not a rewind, history kept.
    store.apply(&sync(99, 5000));
    assert_eq!(translate(&store, 99), Some(5000));
    assert_eq!(translate(&store, 98), Some(1098), "slot 1 kept");
    let history = store.history(TOPIC, PARTITION).expect("has syncs");
    // The older (99, 1099) is dropped: invariant C, it is too close to the new slot 0.
    assert_eq!(history[0], (UpstreamOffset(99), DownstreamOffset(5000)));
    assert_eq!(history[1], (UpstreamOffset(98), DownstreamOffset(1098)));
    assert_eq!(translate(&store, 10), old);

    // Below slot 0: everything replaced by the new sync.
    store.apply(&sync(50, 7000));
    assert_eq!(upstreams(&store), [50; SYNC_HISTORY_SLOTS]);
    let cases = [(10, None), (49, None), (50, Some(7000)), (99, Some(7001))];
    for (g, want) in cases {
        assert_eq!(translate(&store, g), want, "g={g}");
    }
}

#[test]
fn downstream_rewind_is_applied_like_any_sync() {
    run(&[
        Step::Start,
        Step::Sync(100, 500),
        Step::Sync(101, 3),
        Step::Translate(101, Some(3)),
        Step::Translate(102, Some(4)),
        Step::Translate(100, Some(500)),
    ]);
}

#[test]
fn extreme_offsets() {
    let mut store = OffsetSyncStore::new();
    store.mark_read_to_end();
    store.apply(&sync(0, i64::MAX));
    assert_eq!(translate(&store, 0), Some(i64::MAX));
    assert_eq!(translate(&store, 1), None, "downstream + 1 overflows");
    store.apply(&sync(i64::MAX - 1, 7));
    store.apply(&sync(i64::MAX, 8));
    // A jump of 2^62 or more breaks invariant B even for slot 63 (as in MM2): D does not hold.
    assert_invariants(&store, i64::MAX, None);
    assert_eq!(translate(&store, 0), None, "the first sync was dropped");
    assert_eq!(translate(&store, i64::MAX), Some(8));
    assert_eq!(translate(&store, i64::MAX - 1), Some(7));
}

/// The brief's history check, done exhaustively: syncs at every upstream offset `0..N` (after
/// the initial read), and after each one every group offset `G` in `0..=head` is translated.
///
/// Guarantee checked (deterministic): the sync used has `s.upstream <= G` (never a skip: the
/// result is at most `G + 1` on this 1:1 mapping) and lags `G` by at most twice the distance
/// from `G` to the newest sync: `G - s.upstream <= 2 * (head - G)`.
#[test]
fn unit_spaced_history_precision() {
    const N: i64 = 1000;
    let mut store = OffsetSyncStore::new();
    store.mark_read_to_end();
    for head in 0..N {
        store.apply(&sync(head, head));
        assert_invariants(&store, head, Some(0));
        for g in 0..=head {
            let got = translate(&store, g).expect("every G >= first sync translates");
            let used = if got == g { g } else { got - 1 };
            assert!(used <= g, "skip: head {head}, g {g} -> {got}");
            assert!(g - used <= 2 * (head - g), "too stale: head {head}, g {g} -> {got}");
        }
    }
    let distinct = [999, 998, 996, 992, 984, 976, 960, 896, 768, 512, 0];
    let ups = upstreams(&store);
    assert_eq!(ups[..distinct.len()], distinct, "layout after {N} unit syncs");
    assert!(ups[distinct.len()..].iter().all(|&u| u == 0));
    // The brief's example, ~500 back from the head (999): the nearest kept sync below 500 is
    // the first one, 0; 500 - 0 <= 2 * 499.
    let cases = [
        (999, 999),
        (998, 998),
        (990, 985),
        (900, 897),
        (800, 769),
        (600, 513),
        (512, 512),
        (511, 1),
        (500, 1),
        (0, 0),
    ];
    for (g, want) in cases {
        assert_eq!(translate(&store, g), Some(want), "g={g}");
    }
}

/// MM2 `testConsistentlySpacedSyncs`: with evenly spaced syncs each new sync drops at most one
/// distinct older sync from the history.
#[test]
fn evenly_spaced_syncs_expire_at_most_one() {
    let mut step = 1i64;
    while step < i64::MAX / 100 {
        for first in 0..30 {
            let mut store = OffsetSyncStore::new();
            store.mark_read_to_end();
            store.apply(&sync(first, first));
            let mut last_distinct = 1;
            for n in 1..=100 {
                let off = first + n * step;
                store.apply(&sync(off, off));
                if first == 0 {
                    assert_invariants(&store, off, Some(first));
                }
                let ups = upstreams(&store);
                assert_eq!((ups[0], ups[63]), (off, first), "A and D");
                let distinct = 1 + ups.windows(2).filter(|w| w[0] != w[1]).count();
                let expired = last_distinct as i64 + 1 - distinct as i64;
                assert!(expired <= 1, "step {step}, first {first}: {expired} expired");
                last_distinct = distinct;
            }
        }
        step = step * 2 + 1;
    }
}

#[test]
fn keeping_history_translates_like_a_store_running_since_the_first_sync() {
    let syncs: Vec<OffsetSync> = (0..1000)
        .map(|i| OffsetSync {
            topic: "t".into(),
            partition: 0,
            upstream: UpstreamOffset(i * 3),
            downstream: DownstreamOffset(i),
        })
        .collect();
    let mut live = OffsetSyncStore::new();
    live.mark_read_to_end();
    let mut loaded = OffsetSyncStore::keeping_history();
    let mut replacing = OffsetSyncStore::new();
    for s in &syncs {
        live.apply(s);
        loaded.apply(s);
        replacing.apply(s);
    }
    loaded.mark_read_to_end();
    replacing.mark_read_to_end();
    for g in (0..3000).step_by(7) {
        let g = UpstreamOffset(g);
        assert_eq!(loaded.translate("t", 0, g), live.translate("t", 0, g), "G={g:?}");
    }
    assert_eq!(
        replacing.translate("t", 0, UpstreamOffset(1500)),
        None,
        "the default store keeps only the newest sync while loading"
    );
}
