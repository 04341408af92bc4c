//! A saved position that cannot be true (it does not decode, is below zero, or lies past the
//! source's end) is never taken as a start: it is rebuilt from what the target itself shows, the
//! partition's last offset sync while the target partition still holds its record, and where
//! there is no such evidence the flow stops naming the partition and the bad record.

use super::{Partition, Read, Start, Stored};
use crate::positions::Invalid;

/// A position rebuilt from the last offset sync: the record at source offset `upstream` was
/// written at target offset `downstream`, so the partition resumes after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebuilt {
    pub upstream: i64,
    pub downstream: i64,
}

impl Rebuilt {
    /// The next source offset to read: the one after the synced record.
    pub fn next_offset(&self) -> i64 {
        self.upstream + 1
    }
}

/// A position that cannot be true, found at start ([`super::Event::InvalidPosition`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPosition {
    pub topic: String,
    pub partition: i32,
    /// The offset of its record in the positions topic.
    pub record_offset: Option<i64>,
    pub invalid: Invalid,
    /// The start rebuilt from the target's evidence; `None`: there is none, the flow stops.
    pub rebuilt: Option<Rebuilt>,
}

/// Why `tp`'s saved position cannot be true, with its record's offset: kept apart at load, or a
/// next offset past the source's end as `read` gives it.
pub(super) fn invalid(stored: &Stored, read: &Read, tp: &Partition) -> Option<(Option<i64>, Invalid)> {
    if let Some((offset, why)) = stored.invalid.get(tp) {
        return Some((Some(*offset), why.clone()));
    }
    let saved = stored.strait.get(tp)?;
    let &(_, end) = read.watermarks.get(tp)?;
    (saved.next_offset > end).then_some((None, Invalid::PastEnd { next_offset: saved.next_offset, end }))
}

/// What becomes of `tp`, whose position cannot be true: its last offset sync, when the target
/// partition still holds the synced record and the source still has the offset after it, gives
/// the start; else none, and the flow stops.
pub(super) fn rebuild(
    stored: &Stored,
    read: &Read,
    tp: &Partition,
    (record_offset, invalid): (Option<i64>, Invalid),
) -> (Option<Start>, InvalidPosition) {
    let rebuilt = stored.last_syncs.get(tp).and_then(|&(upstream, downstream)| {
        let on_target = stored.target_ends.get(tp).is_some_and(|end| *end > downstream);
        let on_source = read.watermarks.get(tp).is_none_or(|(_, end)| upstream < *end);
        (on_target && on_source).then_some(Rebuilt { upstream, downstream })
    });
    let start = rebuilt.map(|r| Start::Rebuilt(r.next_offset()));
    (start, InvalidPosition { topic: tp.0.clone(), partition: tp.1, record_offset, invalid, rebuilt })
}
