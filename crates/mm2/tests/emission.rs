//! Offset-sync emission (MM2 3.7+ `OffsetSyncWriter.PartitionState`).

use strait_mm2::{DownstreamOffset, Emit, PartitionState, UpstreamOffset, DEFAULT_OFFSET_LAG_MAX};

fn feed(state: &mut PartitionState, up: i64, down: i64, lag: u64) -> Emit {
    state.update(UpstreamOffset(up), DownstreamOffset(down), lag)
}

/// The vector from mm2-formats.md, max lag 50.
#[test]
fn doc_vector_max_lag_50() {
    use Emit::{Delayed as F, Now as T};
    let table = [
        ((0, 100), T),
        ((2, 102), T),
        ((3, 152), F),
        ((4, 153), T),
        ((5, 154), F),
        ((6, 203), F),
        ((7, 204), T),
        ((2, 206), T),
        ((3, 207), F),
        ((4, 3), T),
        ((5, 4), F),
    ];
    let mut state = PartitionState::new();
    for ((up, down), want) in table {
        assert_eq!(feed(&mut state, up, down, 50), want, "({up},{down})");
    }
    assert_eq!(state.delayed(), Some((UpstreamOffset(5), DownstreamOffset(4))));
}

#[test]
fn lag_zero_syncs_every_record() {
    let mut state = PartitionState::new();
    for i in 0..1000 {
        assert_eq!(feed(&mut state, i, 5000 + i, 0), Emit::Now, "record {i}");
        assert_eq!(state.delayed(), None);
    }
}

#[test]
fn default_lag_syncs_every_hundredth_contiguous_record() {
    let mut state = PartitionState::new();
    let synced: Vec<i64> = (0..=300).filter(|&i| feed(&mut state, i, i, DEFAULT_OFFSET_LAG_MAX) == Emit::Now).collect();
    assert_eq!(synced, vec![0, 101, 202]);
}

#[test]
fn take_delayed_semantics() {
    let mut state = PartitionState::default();
    assert_eq!(state.take_delayed(), None, "fresh state has nothing pending");
    assert_eq!(state.last_sync_downstream(), None);

    assert_eq!(feed(&mut state, 10, 0, 100), Emit::Now);
    assert_eq!(state.take_delayed(), None, "a Now sync is not pending");
    assert_eq!(state.last_sync_downstream(), Some(DownstreamOffset(0)));

    assert_eq!(feed(&mut state, 11, 1, 100), Emit::Delayed);
    assert_eq!(feed(&mut state, 12, 2, 100), Emit::Delayed);
    assert_eq!(state.delayed(), Some((UpstreamOffset(12), DownstreamOffset(2))), "newest replaces");
    assert_eq!(state.take_delayed(), Some((UpstreamOffset(12), DownstreamOffset(2))));
    assert_eq!(state.take_delayed(), None, "taken only once");
    assert_eq!(state.last_sync_downstream(), Some(DownstreamOffset(2)), "taken counts as written");

    // Staleness is now measured from the taken sync: 2 + 1 + 100 = 103 is the first Now.
    for i in 3..103 {
        assert_eq!(feed(&mut state, 10 + i, i, 100), Emit::Delayed, "down {i}");
    }
    assert_eq!(feed(&mut state, 113, 103, 100), Emit::Now);
    assert_eq!(state.delayed(), None, "a Now sync clears the pending one");
}

#[test]
fn gaps_and_truncation_sync_now() {
    let mut state = PartitionState::new();
    assert_eq!(feed(&mut state, 0, 0, 100), Emit::Now);
    assert_eq!(feed(&mut state, 1, 1, 100), Emit::Delayed);
    assert_eq!(feed(&mut state, 3, 2, 100), Emit::Now, "upstream gap");
    assert_eq!(feed(&mut state, 4, 3, 100), Emit::Delayed);
    assert_eq!(feed(&mut state, 4, 4, 100), Emit::Now, "upstream repeat");
    assert_eq!(feed(&mut state, 5, 0, 100), Emit::Now, "downstream truncated");
    assert_eq!(feed(&mut state, 6, 1, 100), Emit::Delayed);
}

#[test]
fn extreme_values_do_not_overflow() {
    let mut state = PartitionState::new();
    assert_eq!(feed(&mut state, i64::MIN, i64::MIN, u64::MAX), Emit::Now);
    assert_eq!(feed(&mut state, i64::MAX, i64::MAX, u64::MAX), Emit::Now, "upstream gap");
    assert_eq!(feed(&mut state, i64::MIN, 0, u64::MAX), Emit::Now, "rewind");
    assert_eq!(feed(&mut state, i64::MIN + 1, i64::MAX, u64::MAX), Emit::Delayed);
    assert_eq!(feed(&mut state, i64::MIN + 2, i64::MAX, 0), Emit::Now);
}
