//! The resume decision as a table: each row the facts, the reads asked for ([`checks`]) and the
//! expected starts and report ([`decide`]). The e2e test each rule was tested through alone is
//! named in the row.

use std::collections::{HashMap, HashSet};

mod invalid;

use super::*;
use crate::config::{OnSourceGap, StartFrom};
use crate::positions::Saved;

const EARLIEST: Rules = Rules { start_from: StartFrom::Earliest, on_source_gap: OnSourceGap::Continue };
const LATEST: Rules = Rules { start_from: StartFrom::Latest, on_source_gap: OnSourceGap::Continue };
const FAIL: Rules = Rules { start_from: StartFrom::Earliest, on_source_gap: OnSourceGap::Fail };

fn tp(topic: &str, partition: i32) -> Partition {
    (topic.to_string(), partition)
}

fn id(s: &str) -> TopicId {
    TopicId(s.into())
}

/// A saved position at `next`, nothing else known (MM2's have only this).
fn at(next: i64) -> Saved {
    Saved { next_offset: next, last_timestamp: None, last_downstream: None, topic_id: None }
}

fn with(saved: Saved, timestamp: Option<i64>, downstream: Option<i64>, topic_id: Option<&str>) -> Saved {
    Saved { last_timestamp: timestamp, last_downstream: downstream, topic_id: topic_id.map(id), ..saved }
}

/// One row: the facts, then what is expected.
struct Row {
    name: &'static str,
    rules: Rules,
    strait: Vec<(Partition, Saved)>,
    invalid: Vec<(Partition, (i64, Invalid))>,
    last_syncs: Vec<(Partition, (i64, i64))>,
    target_ends: Vec<(Partition, i64)>,
    mm2: Vec<(Partition, i64)>,
    assigned: Vec<Partition>,
    recreated_in_run: Vec<&'static str>,
    ids: Vec<(&'static str, &'static str)>,
    changed: Vec<Partition>,
    watermarks: Vec<(Partition, (i64, i64))>,
    fresh: Vec<Partition>,
    /// Expected: the timestamp checks (partition, offset) and watermark reads asked for.
    timestamp_checks: Vec<(Partition, i64)>,
    watermark_reads: Vec<Partition>,
    starts: Vec<Start>,
    report: Vec<Event>,
    stop: Option<Stop>,
}

/// A row with no facts: a new flow, `start_from = "earliest"`, partition orders/0.
fn row(name: &'static str) -> Row {
    Row {
        name,
        rules: EARLIEST,
        strait: vec![],
        invalid: vec![],
        last_syncs: vec![],
        target_ends: vec![],
        mm2: vec![],
        assigned: vec![],
        recreated_in_run: vec![],
        ids: vec![],
        changed: vec![],
        watermarks: vec![],
        fresh: vec![tp("orders", 0)],
        timestamp_checks: vec![],
        watermark_reads: vec![],
        starts: vec![Start::LogStart],
        report: vec![],
        stop: None,
    }
}

fn gap(topic: &str, partition: i32, saved: i64, log_start: i64) -> Gap {
    Gap { topic: topic.into(), partition, saved, log_start }
}

fn rows() -> Vec<Row> {
    let orders = |p| tp("orders", p);
    vec![
        row("a new flow starts at the log start, reading nothing"),
        Row {
            strait: vec![(orders(0), with(at(42), Some(7), Some(9), Some("A")))],
            target_ends: vec![(orders(0), 10)],
            ids: vec![("orders", "A")],
            watermarks: vec![(orders(0), (0, 50))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(42)],
            ..row("a saved position of the same topic id resumes there (crash::sigkill_mid_stream)")
        },
        Row {
            rules: LATEST,
            watermarks: vec![(orders(0), (3, 5)), (orders(1), (0, 5))],
            fresh: vec![orders(0), orders(1)],
            watermark_reads: vec![orders(0), orders(1)],
            starts: vec![Start::End(5), Start::End(5)],
            report: vec![
                Event::Latest { topic: "orders".into(), partition: 0, offset: 5 },
                Event::Latest { topic: "orders".into(), partition: 1, offset: 5 },
            ],
            ..row("latest: a new topic starts at its end, saved at once (selection::start_from_latest)")
        },
        Row {
            rules: LATEST,
            strait: vec![(orders(0), at(5)), (orders(1), at(5))],
            watermarks: vec![(orders(0), (0, 7)), (orders(1), (0, 7))],
            fresh: vec![orders(0), orders(1)],
            watermark_reads: vec![orders(0), orders(1)],
            starts: vec![Start::At(5), Start::At(5)],
            ..row("latest: a restart resumes at the saved start, not the end (selection::start_from_latest)")
        },
        Row {
            rules: LATEST,
            strait: vec![(orders(0), at(5))],
            watermarks: vec![(orders(0), (0, 7))],
            fresh: vec![orders(0), orders(2)],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(5), Start::LogStart],
            ..row("latest: a new partition of a topic with positions starts at the log start (selection::start_from_latest)")
        },
        Row {
            rules: LATEST,
            assigned: vec![orders(0), orders(1)],
            fresh: vec![orders(2)],
            ..row("latest: a partition added while running starts at the log start (selection::start_from_latest)")
        },
        Row {
            mm2: vec![(orders(0), 31), (orders(1), 12)],
            watermarks: vec![(orders(0), (0, 40)), (orders(1), (0, 40))],
            fresh: vec![orders(0), orders(1)],
            watermark_reads: vec![orders(0), orders(1)],
            starts: vec![Start::At(31), Start::At(12)],
            report: vec![Event::FromMm2 { partitions: 2 }],
            ..row("cut-over: no Strait position, MM2's resumes (cutover::strait_resumes_where_mm2_stopped)")
        },
        Row {
            rules: LATEST,
            strait: vec![(orders(0), with(at(40), None, Some(39), None))],
            target_ends: vec![(orders(0), 40)],
            mm2: vec![(orders(0), 31)],
            watermarks: vec![(orders(0), (0, 50))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(40)],
            ..row("cut-over: Strait's own position wins over MM2's")
        },
        Row {
            strait: vec![(orders(0), with(at(30), Some(7), Some(29), Some("A"))), (orders(1), at(30))],
            target_ends: vec![(orders(0), 0)],
            ids: vec![("orders", "A")],
            watermarks: vec![(orders(1), (0, 35))],
            fresh: vec![orders(0), orders(1)],
            watermark_reads: vec![orders(1)],
            timestamp_checks: vec![],
            starts: vec![Start::LogStart, Start::At(30)],
            report: vec![Event::LostOnTarget {
                topic: "orders".into(),
                partition: 0,
                last_downstream: 29,
                target_end: 0,
            }],
            ..row("target check: a target partition that lost its records is copied again (crash::target_topic_deleted)")
        },
        Row {
            strait: vec![(orders(0), with(at(30), None, Some(29), None))],
            target_ends: vec![(orders(0), 30)],
            watermarks: vec![(orders(0), (0, 35))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(30)],
            ..row("target check: a target partition ending just after the last record written keeps the position")
        },
        Row {
            strait: vec![(orders(0), with(at(30), None, Some(29), None))],
            target_ends: vec![(orders(0), 29)],
            mm2: vec![(orders(0), 12)],
            watermarks: vec![(orders(0), (0, 35))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(12)],
            report: vec![
                Event::LostOnTarget { topic: "orders".into(), partition: 0, last_downstream: 29, target_end: 29 },
                Event::FromMm2 { partitions: 1 },
            ],
            ..row("target check: a target partition ending at the last record written lost it; MM2's position applies if any")
        },
        Row {
            strait: vec![(orders(0), at(30))],
            watermarks: vec![(orders(0), (0, 35))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(30)],
            ..row("target check: a position with no record written (residency, loop guard) is not checked")
        },
        Row {
            strait: vec![(orders(0), at(100))],
            watermarks: vec![(orders(0), (120, 150))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(120)],
            report: vec![Event::SourceGap { gap: gap("orders", 0, 100, 120), on_source_gap: OnSourceGap::Continue }],
            ..row("gap: a position below the log start resumes at it, reported (crash::records_deleted_on_the_source)")
        },
        Row {
            rules: FAIL,
            strait: vec![(orders(0), at(100))],
            watermarks: vec![(orders(0), (120, 150))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(120)],
            report: vec![Event::SourceGap { gap: gap("orders", 0, 100, 120), on_source_gap: OnSourceGap::Fail }],
            stop: Some(Stop::Gap(gap("orders", 0, 100, 120))),
            ..row("gap: on_source_gap = fail stops the flow (crash::a_source_gap_stops_the_flow)")
        },
        Row {
            rules: FAIL,
            strait: vec![(orders(0), at(120))],
            watermarks: vec![(orders(0), (120, 150))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(120)],
            ..row("gap: a position at the log start is no gap")
        },
        Row {
            rules: FAIL,
            mm2: vec![(orders(0), 100)],
            watermarks: vec![(orders(0), (120, 150))],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(120)],
            report: vec![
                Event::FromMm2 { partitions: 1 },
                Event::SourceGap { gap: gap("orders", 0, 100, 120), on_source_gap: OnSourceGap::Fail },
            ],
            stop: Some(Stop::Gap(gap("orders", 0, 100, 120))),
            ..row("gap: MM2's position below the log start is a gap too")
        },
        Row {
            strait: vec![
                (orders(0), with(at(30), Some(7), None, Some("A"))),
                (orders(1), with(at(20), Some(7), None, Some("A"))),
            ],
            ids: vec![("orders", "B")],
            fresh: vec![orders(0), orders(1)],
            starts: vec![Start::LogStart, Start::LogStart],
            report: vec![Event::RecreatedWhileStopped {
                topic: "orders".into(),
                old_id: Some(id("A")),
                new_id: Some(id("B")),
            }],
            ..row("recreated while stopped: another topic id, copied from its log start, reported once (recreated::a_topic_recreated_while_stopped)")
        },
        Row {
            strait: vec![(orders(0), with(at(30), Some(7), None, None))],
            ids: vec![("orders", "B")],
            changed: vec![orders(0)],
            watermarks: vec![(orders(0), (0, 35))],
            timestamp_checks: vec![(orders(0), 29)],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::LogStart],
            report: vec![Event::TimestampChanged { topic: "orders".into(), partition: 0 }],
            ..row("recreated while stopped, saved without an id: the record before the position has another timestamp")
        },
        Row {
            strait: vec![(orders(0), with(at(30), Some(7), None, Some("A")))],
            watermarks: vec![(orders(0), (0, 35))],
            timestamp_checks: vec![(orders(0), 29)],
            watermark_reads: vec![orders(0)],
            starts: vec![Start::At(30)],
            ..row("a topic without an id now (old broker) is checked by timestamp; the same timestamp resumes")
        },
        Row {
            strait: vec![(orders(0), with(at(0), Some(7), None, None)), (orders(1), with(at(5), None, None, None))],
            watermarks: vec![(orders(0), (0, 35)), (orders(1), (0, 35))],
            fresh: vec![orders(0), orders(1)],
            watermark_reads: vec![orders(0), orders(1)],
            starts: vec![Start::At(0), Start::At(5)],
            ..row("no timestamp check without a record before the position or a saved timestamp")
        },
        Row {
            rules: LATEST,
            strait: vec![(orders(0), with(at(30), Some(7), None, Some("A")))],
            recreated_in_run: vec!["orders"],
            ids: vec![("orders", "B")],
            fresh: vec![orders(0)],
            starts: vec![Start::LogStart],
            ..row("recreated while running: the saved position of the old topic never applies (recreated::a_topic_recreated_while_running)")
        },
        Row {
            rules: LATEST,
            recreated_in_run: vec!["orders"],
            ids: vec![("orders", "B")],
            watermarks: vec![(orders(0), (0, 40))],
            starts: vec![Start::LogStart],
            ..row("latest: a topic recreated while running starts at its log start, though nothing was saved for it")
        },
        Row {
            rules: LATEST,
            strait: vec![(orders(0), with(at(30), None, Some(29), None))],
            target_ends: vec![(orders(0), 0)],
            watermarks: vec![(orders(0), (0, 35))],
            starts: vec![Start::LogStart],
            report: vec![Event::LostOnTarget { topic: "orders".into(), partition: 0, last_downstream: 29, target_end: 0 }],
            ..row("latest: a topic whose target lost its records is copied again from its log start, not its end")
        },
    ]
}

#[test]
fn each_partition_starts_where_the_table_says() {
    for r in rows().into_iter().chain(invalid::rows()) {
        let stored = Stored {
            strait: r.strait.into_iter().collect(),
            invalid: r.invalid.into_iter().collect(),
            last_syncs: r.last_syncs.into_iter().collect(),
            target_ends: r.target_ends.into_iter().collect(),
            mm2: r.mm2.into_iter().map(|(tp, next)| (tp, at(next))).collect(),
        };
        let assigned: HashSet<Partition> = r.assigned.into_iter().collect();
        let recreated_in_run: HashSet<String> = r.recreated_in_run.iter().map(|t| t.to_string()).collect();
        let topic_ids: HashMap<String, TopicId> = r.ids.iter().map(|(t, i)| (t.to_string(), id(i))).collect();
        let source = Source { assigned: &assigned, recreated_in_run: &recreated_in_run, topic_ids: &topic_ids };

        let checks = checks(&r.rules, &stored, &source, &r.fresh);
        let asked: Vec<(Partition, i64)> =
            checks.timestamps.iter().map(|c| ((c.topic.clone(), c.partition), c.offset)).collect();
        assert_eq!(asked, r.timestamp_checks, "{}: timestamp checks", r.name);
        assert_eq!(checks.watermarks, r.watermark_reads, "{}: watermark reads", r.name);

        let read =
            Read { timestamp_changed: r.changed.into_iter().collect(), watermarks: r.watermarks.into_iter().collect() };
        let plan = decide(&r.rules, &stored, &source, &read, &r.fresh);
        let starts: Vec<Start> = plan.starts.iter().map(|(_, s)| *s).collect();
        let partitions: Vec<Partition> = plan.starts.into_iter().map(|(tp, _)| tp).collect();
        assert_eq!(partitions, r.fresh, "{}: a start for each partition, in order", r.name);
        assert_eq!(starts, r.starts, "{}: starts", r.name);
        assert_eq!(plan.report, r.report, "{}: report", r.name);
        assert_eq!(plan.stop, r.stop, "{}: stop", r.name);
    }
}

#[test]
fn a_gap_counts_the_records_between_the_position_and_the_log_start() {
    assert_eq!(gap("orders", 0, 100, 120).lost(), 20);
}
