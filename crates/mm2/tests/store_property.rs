//! Property: on any monotone replication whose syncs come from the crate's own emission rule
//! ([`PartitionState`]), [`OffsetSyncStore::translate`] never skips a record, and translates
//! exactly the group offsets at or past the oldest usable sync.

use proptest::prelude::*;
use strait_mm2::{
    DownstreamOffset, Emit, OffsetSync, OffsetSyncStore, PartitionState, UpstreamOffset, SYNC_HISTORY_SLOTS,
};

const TOPIC: &str = "orders";
const PARTITION: i32 = 0;

/// A generated replication of one partition.
#[derive(Debug, Clone)]
struct Case {
    /// Upstream offset of the first replicated record.
    first_upstream: i64,
    /// Downstream offset of the first replicated record; the rest follow consecutively.
    first_downstream: i64,
    /// Upstream gap before each later record (1 = contiguous).
    gaps: Vec<i64>,
    /// After which records the caller flushes (promotes the delayed sync), one flag per record.
    flushes: Vec<bool>,
    /// MM2 `offset.lag.max`.
    offset_lag_max: u64,
    /// Fraction (per mille) of the syncs read before `mark_read_to_end`.
    ready_per_mille: u32,
    /// Group offsets to translate, relative to `first_upstream`.
    probes: Vec<i64>,
}

fn case() -> impl Strategy<Value = Case> {
    let gap = prop_oneof![8 => Just(1i64), 2 => 2i64..40];
    (1usize..400).prop_flat_map(move |n| {
        (
            0i64..1_000,
            0i64..1_000,
            prop::collection::vec(gap.clone(), n - 1),
            prop::collection::vec(prop::bool::weighted(0.1), n),
            0u64..=20,
            0u32..=1000,
            prop::collection::vec(-5i64..3_000, 1..40),
        )
            .prop_map(|(first_upstream, first_downstream, gaps, flushes, lag, ready, probes)| Case {
                first_upstream,
                first_downstream,
                gaps,
                flushes,
                offset_lag_max: lag,
                ready_per_mille: ready,
                probes,
            })
    })
}

/// `(upstream, downstream)` offset pairs.
type Pairs = Vec<(i64, i64)>;

/// The records `(upstream, downstream)` and the syncs emitted for them, in topic order.
fn replicate(case: &Case) -> (Pairs, Pairs) {
    let mut records = vec![(case.first_upstream, case.first_downstream)];
    for gap in &case.gaps {
        let &(up, down) = records.last().expect("non-empty");
        records.push((up + gap, down + 1));
    }
    let mut state = PartitionState::new();
    let mut syncs = Vec::new();
    for (&(up, down), &flush) in records.iter().zip(&case.flushes) {
        let emit = state.update(UpstreamOffset(up), DownstreamOffset(down), case.offset_lag_max);
        if emit == Emit::Now {
            syncs.push((up, down));
        }
        if flush {
            if let Some((u, d)) = state.take_delayed() {
                syncs.push((u.0, d.0));
            }
        }
    }
    (records, syncs)
}

/// Where a consumer resuming at group offset `g` must start on the target so that it skips
/// nothing: the downstream offset of the first record with upstream `>= g`, or the end of the
/// replicated partition if there is none.
fn no_skip_bound(records: &[(i64, i64)], g: i64) -> i64 {
    let at = records.partition_point(|&(up, _)| up < g);
    match records.get(at) {
        Some(&(_, down)) => down,
        None => records.last().expect("non-empty").1 + 1,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn translation_never_skips_and_covers_the_usable_range(case in case()) {
        let (records, syncs) = replicate(&case);
        prop_assert!(!syncs.is_empty(), "the first record always syncs");
        for pair in syncs.windows(2) {
            prop_assert!(pair[0].0 < pair[1].0, "emitted syncs are in upstream order");
        }
        // Syncs [0, ready_at) are read before the end of the topic is reached.
        let ready_at = syncs.len() * case.ready_per_mille as usize / 1000;
        // Oldest sync usable once ready: the last one of the initial read, else the first one.
        let oldest_usable = syncs[ready_at.saturating_sub(1)].0;

        let mut store = OffsetSyncStore::new();
        for (i, &(up, down)) in syncs.iter().enumerate() {
            if i == ready_at {
                store.mark_read_to_end();
            }
            store.apply(&OffsetSync {
                topic: TOPIC.into(),
                partition: PARTITION,
                upstream: UpstreamOffset(up),
                downstream: DownstreamOffset(down),
            });
            if !store.is_ready() {
                for &p in &case.probes {
                    let g = UpstreamOffset(case.first_upstream + p);
                    prop_assert_eq!(store.translate(TOPIC, PARTITION, g), None);
                }
                continue;
            }
            let history = store.history(TOPIC, PARTITION).expect("synced partition");
            prop_assert_eq!(history[0].0 .0, up, "A: slot 0 is the newest");
            prop_assert_eq!(history[SYNC_HISTORY_SLOTS - 1].0 .0, oldest_usable, "D");
            for &p in &case.probes {
                let g = case.first_upstream + p;
                let got = store.translate(TOPIC, PARTITION, UpstreamOffset(g));
                match got {
                    Some(DownstreamOffset(d)) => {
                        prop_assert!(g >= oldest_usable, "g={} translated below the oldest usable sync", g);
                        let bound = no_skip_bound(&records, g);
                        prop_assert!(d <= bound, "skip: g={} -> {}, first unread record at {}", g, d, bound);
                    }
                    None => prop_assert!(g < oldest_usable, "g={} >= {} not translated", g, oldest_usable),
                }
            }
        }
        if ready_at == syncs.len() {
            store.mark_read_to_end();
            let g = UpstreamOffset(oldest_usable);
            let newest = syncs.last().expect("non-empty").1;
            prop_assert_eq!(store.translate(TOPIC, PARTITION, g), Some(DownstreamOffset(newest)));
        }
        // Final state, probed around every sync ever emitted.
        for &(up, _) in &syncs {
            for g in [up - 1, up, up + 1] {
                let got = store.translate(TOPIC, PARTITION, UpstreamOffset(g));
                prop_assert_eq!(got.is_some(), g >= oldest_usable, "g={}", g);
                if let Some(DownstreamOffset(d)) = got {
                    prop_assert!(d <= no_skip_bound(&records, g), "skip at g={}", g);
                }
            }
        }
    }
}
