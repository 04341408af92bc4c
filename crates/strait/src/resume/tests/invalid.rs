//! Rows of the table for saved positions that cannot be true (`resume/invalid.rs`).

use super::*;

fn bad(record_offset: Option<i64>, invalid: Invalid, rebuilt: Option<(i64, i64)>) -> InvalidPosition {
    let rebuilt = rebuilt.map(|(upstream, downstream)| Rebuilt { upstream, downstream });
    InvalidPosition { topic: "orders".into(), partition: 0, record_offset, invalid, rebuilt }
}

pub(super) fn rows() -> Vec<Row> {
    let orders = |p| tp("orders", p);
    let undecodable = bad(Some(7), Invalid::Undecodable, Some((41, 9)));
    let negative = bad(Some(8), Invalid::Negative(-5), None);
    let past_end = bad(None, Invalid::PastEnd { next_offset: 1_000_000_000, end: 50 }, Some((41, 9)));
    let synced_record_gone = bad(Some(7), Invalid::Undecodable, None);
    vec![
        Row {
            invalid: vec![(orders(0), (7, Invalid::Undecodable))],
            last_syncs: vec![(orders(0), (41, 9))],
            target_ends: vec![(orders(0), 10)],
            watermarks: vec![(orders(0), (0, 50))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::Rebuilt(42)],
            report: vec![Event::InvalidPosition(undecodable)],
            ..row("invalid: an undecodable position resumes after the last offset sync the target holds (invalid_positions::a_position_that_cannot_be_true)")
        },
        Row {
            invalid: vec![(orders(0), (8, Invalid::Negative(-5)))],
            watermarks: vec![(orders(0), (0, 50))],
            watermark_reads: vec![orders(0)],
            report: vec![Event::InvalidPosition(negative.clone())],
            stop: Some(Stop::Invalid(negative)),
            ..row("invalid: a negative position without an offset sync stops the flow, naming its record (invalid_positions::without_evidence)")
        },
        Row {
            strait: vec![(orders(0), at(1_000_000_000))],
            last_syncs: vec![(orders(0), (41, 9))],
            target_ends: vec![(orders(0), 10)],
            watermarks: vec![(orders(0), (0, 50))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::Rebuilt(42)],
            report: vec![Event::InvalidPosition(past_end)],
            ..row("invalid: a position past the source's end is rebuilt from the last offset sync")
        },
        Row {
            invalid: vec![(orders(0), (7, Invalid::Undecodable))],
            last_syncs: vec![(orders(0), (41, 9))],
            target_ends: vec![(orders(0), 9)],
            watermarks: vec![(orders(0), (0, 50))],
            watermark_reads: vec![orders(0)],
            report: vec![Event::InvalidPosition(synced_record_gone.clone())],
            stop: Some(Stop::Invalid(synced_record_gone)),
            ..row("invalid: an offset sync whose record the target no longer holds is no evidence")
        },
        Row {
            strait: vec![(orders(0), at(50))],
            last_syncs: vec![(orders(0), (41, 9))],
            target_ends: vec![(orders(0), 10)],
            watermarks: vec![(orders(0), (0, 50))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(50)],
            ..row("invalid: a position at the source's end is true")
        },
    ]
}
