//! TargetSink used directly, as the connector runtime would: put, stage positions, commit
//! (records, then offset syncs and positions), abort and close, in both delivery modes; and the
//! offset syncs it hands to a caller that drains them.

use std::sync::Arc;

use strait::config::Config;
use strait::positions::{self, Saved};
use strait::record::ReplicatedRecord;
use strait::resume::load::stored;
use strait::sink::{SinkParams, TargetSink};
use strait::topic_id::TopicId;
use strait_connect::{ConnectError, ConnectRecord, Header, Sink, SourceOffset};
use strait_mm2::OffsetSync;

use crate::support::*;

/// The sink of slot 0 of `flow`.
async fn start(flow: &Arc<strait::config::Flow>) -> Result<TargetSink, ConnectError> {
    TargetSink::start(SinkParams { flow: flow.clone(), slot: 0 }).await
}

/// What the runtime does at the end of a batch: the positions staged, then the commit.
async fn commit_at(sink: &mut TargetSink, positions: &[SourceOffset]) -> Result<(), ConnectError> {
    sink.stage_positions(positions);
    sink.commit().await
}

fn record(topic: &Arc<str>, offset: i64, value: Option<&str>) -> ConnectRecord<(), ReplicatedRecord> {
    ConnectRecord {
        key: None,
        value: value.map(|v| ReplicatedRecord::Owned {
            key: Some(format!("k{offset}").into_bytes()),
            value: Some(v.as_bytes().to_vec()),
        }),
        timestamp_ms: Some(1_700_000_000_000 + offset),
        headers: vec![Header { key: "h".into(), value: None }],
        source_offset: SourceOffset { topic: topic.clone(), partition: 0, offset },
        size_bytes: 100,
    }
}

/// The flow of `f` with `flow_extra` settings, as `strait run` would resolve it.
fn sink_flow(f: &TopicFlow, flow_extra: &str) -> Arc<strait::config::Flow> {
    Arc::new(Config::parse(&f.config(flow_extra)).unwrap().remove(0))
}

/// The offset syncs of `topic` in `<src>`'s offset-syncs topic on the target, as (upstream, downstream).
fn written_syncs(b: &str, src: &str, topic: &str) -> Vec<(i64, i64)> {
    read_all(b, &format!("mm2-offset-syncs.{src}.internal"), true)
        .remove(&0)
        .unwrap()
        .into_iter()
        .map(|(_, r)| OffsetSync::decode(r.key.as_deref().unwrap(), r.value.as_deref().unwrap()).unwrap())
        .filter(|s| s.topic == topic)
        .map(|s| (s.upstream.0, s.downstream.0))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn target_sink_commit_writes_records_then_offset_syncs_and_positions() {
    let f = TopicFlow::new("sink", 1).await;
    let flow = sink_flow(&f, "offset_lag_max = 3");
    let (b, src, topic) = (f.b.clone(), f.src.clone(), Arc::<str>::from(f.topic.as_str()));
    let mut sink = start(&flow).await.expect("sink starts against real brokers");
    assert!(!sink.supports_transactions(), "at-least-once sink");
    let saved = stored(&flow, 0).await.expect("positions read after the sink started").strait;
    assert!(saved.is_empty(), "a new flow has no positions");
    assert!(sink.drain_offset_syncs().is_empty(), "the first drain turns keeping on");
    // The source sets the id of the topic a position belongs to; the sink saves it with it.
    let id = TopicId("Dm5aXb3nQ9-tH9t1jq4b1Q".into());
    sink.topic_ids().set(&topic, id.clone());

    // Offsets 0..=9 with a record without payload at 5 (skipped, so upstream 6 follows a gap).
    let batch: Vec<_> = (0..10).map(|o| record(&topic, o, (o != 5).then_some("v"))).collect();
    sink.put(batch).await.unwrap();
    commit_at(&mut sink, &[SourceOffset { topic: topic.clone(), partition: 0, offset: 9 }]).await.unwrap();
    // At-least-once, the offset syncs and positions are still being written: close waits for them.
    sink.close().await.unwrap();
    // MM2's rule with offset_lag_max 3: first record, lag reached at down 4, the gap at up 6,
    // and the last record promoted at commit.
    assert_eq!(written_syncs(&b, &src, &topic), vec![(0, 0), (4, 4), (6, 5), (9, 8)]);
    let drained: Vec<(i64, i64)> = sink.drain_offset_syncs().iter().map(|s| (s.upstream.0, s.downstream.0)).collect();
    assert_eq!(drained, vec![(0, 0), (4, 4), (6, 5), (9, 8)], "the drained syncs are those written");
    assert!(sink.drain_offset_syncs().is_empty(), "a drain clears them");

    let remote = format!("{src}.{topic}");
    let on_target = read_all(&b, &remote, true).remove(&0).unwrap();
    assert_eq!(on_target.len(), 9, "the record without payload is skipped");
    let (_, first) = &on_target[0];
    assert_eq!(first.key.as_deref(), Some(&b"k0"[..]));
    assert_eq!(first.timestamp, 1_700_000_000_000);
    assert_eq!(first.headers[0], ("h".to_string(), None), "headers kept, null value included");
    assert_eq!(first.headers[1].0, "strait.provenance", "provenance header added last");

    let saved = positions::load(&flow.target, &flow.name).await.unwrap();
    assert_eq!(
        saved.get(&(topic.to_string(), 0)),
        Some(&Saved {
            next_offset: 10,
            last_timestamp: Some(1_700_000_000_009),
            last_downstream: Some(8),
            topic_id: Some(id)
        })
    );
}

/// At-least-once too: a slot's offset syncs and positions go through its transactional.id, so
/// once another instance took the slot over, the old one can never move them.
#[tokio::test(flavor = "multi_thread")]
async fn an_at_least_once_zombie_cannot_overwrite_positions_or_offset_syncs() {
    let f = TopicFlow::new("alozombie", 1).await;
    let flow = sink_flow(&f, "offset_lag_max = 0");
    let topic = Arc::<str>::from(f.topic.as_str());
    let mut zombie = start(&flow).await.expect("sink starts");
    zombie.put((0..3).map(|o| record(&topic, o, Some("v"))).collect()).await.unwrap();
    commit_at(&mut zombie, &[SourceOffset { topic: topic.clone(), partition: 0, offset: 2 }]).await.unwrap();
    // The state is written in the background; close waits for it (the zombie goes on regardless).
    zombie.close().await.unwrap();

    let mut owner = start(&flow).await.expect("the slot's next owner starts");
    let resumed = stored(&flow, 0).await.expect("positions read after the sink started").strait;
    assert_eq!(resumed.get(&(topic.to_string(), 0)).map(|s| s.next_offset), Some(3));
    zombie.put(vec![record(&topic, 3, Some("zombie"))]).await.unwrap();
    // Its record is written (at-least-once records are not transactional); its state is not, and
    // the failure is reported by the next commit or, here, close.
    commit_at(&mut zombie, &[SourceOffset { topic: topic.clone(), partition: 0, offset: 3 }]).await.unwrap();
    let fenced = zombie.close().await.expect_err("the old owner cannot save");
    assert!(matches!(fenced, ConnectError::Fenced { .. }), "{fenced}");
    let saved = positions::load(&flow.target, &flow.name).await.unwrap();
    assert_eq!(saved.get(&(topic.to_string(), 0)).map(|s| s.next_offset), Some(3), "the position did not move");
    assert_eq!(written_syncs(&f.b, &f.src, &f.topic), vec![(0, 0), (1, 1), (2, 2)], "no sync of the zombie");
    owner.put(vec![record(&topic, 3, Some("v"))]).await.unwrap();
    commit_at(&mut owner, &[SourceOffset { topic: topic.clone(), partition: 0, offset: 3 }]).await.unwrap();
    owner.close().await.unwrap();
    let saved = positions::load(&flow.target, &flow.name).await.unwrap();
    assert_eq!(saved.get(&(topic.to_string(), 0)).map(|s| s.next_offset), Some(4), "the owner saves");
    assert!(owner.drain_offset_syncs().is_empty(), "a sink never drained before kept no sync");
}

#[tokio::test(flavor = "multi_thread")]
async fn transactional_sink_abort_hides_the_batch_and_commit_shows_it_once() {
    let f = TopicFlow::new("txsink", 1).await;
    let flow = sink_flow(&f, "offset_lag_max = 3\ndelivery = \"exactly_once\"");
    let (b, src, topic) = (f.b.clone(), f.src.clone(), Arc::<str>::from(f.topic.as_str()));
    let mut sink = start(&flow).await.expect("transactional sink starts");
    assert!(sink.supports_transactions());
    assert!(sink.drain_offset_syncs().is_empty(), "the first drain turns keeping on");

    // A batch written and aborted: records, syncs and positions all invisible to read_committed.
    sink.begin().await.unwrap();
    sink.put((0..6).map(|o| record(&topic, o, Some("aborted"))).collect()).await.unwrap();
    // Let them reach the log (linger is 5 ms), so the abort has written records to hide.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    sink.abort().await.unwrap();
    // The same records again, committed.
    sink.begin().await.unwrap();
    sink.put((0..6).map(|o| record(&topic, o, Some("v"))).collect()).await.unwrap();
    commit_at(&mut sink, &[SourceOffset { topic: topic.clone(), partition: 0, offset: 5 }]).await.unwrap();

    let remote = format!("{src}.{topic}");
    let on_target = read_all(&b, &remote, true).remove(&0).unwrap();
    let keys: Vec<Vec<u8>> = on_target.iter().map(|(_, r)| r.key.clone().unwrap()).collect();
    assert_eq!(keys, (0..6).map(|o| format!("k{o}").into_bytes()).collect::<Vec<_>>(), "each record once, in order");
    assert!(on_target.iter().all(|(_, r)| r.value.as_deref() == Some(&b"v"[..])), "nothing of the aborted batch");
    // Downstream offsets of the committed copy come after the aborted one (0..=5) and its marker.
    let downstream: Vec<i64> = on_target.iter().map(|(o, _)| *o).collect();
    assert_eq!(downstream, (7..13).collect::<Vec<i64>>());
    assert_eq!(written_syncs(&b, &src, &topic), vec![(0, 7), (4, 11), (5, 12)], "only the committed batch's syncs");
    let drained: Vec<(i64, i64)> = sink.drain_offset_syncs().iter().map(|s| (s.upstream.0, s.downstream.0)).collect();
    assert_eq!(drained, vec![(0, 7), (4, 11), (5, 12)], "the drained syncs are the committed ones");
    let saved = positions::load(&flow.target, &flow.name).await.unwrap();
    assert_eq!(saved.get(&(topic.to_string(), 0)).map(|s| s.next_offset), Some(6));

    // A second sink of the same flow fences the first, which then fails saying so.
    let mut second = start(&flow).await.expect("second instance starts");
    let resumed = stored(&flow, 0).await.expect("positions read after the sink started").strait;
    assert_eq!(
        resumed.get(&(topic.to_string(), 0)).map(|s| s.next_offset),
        Some(6),
        "resumes at the committed position"
    );
    let fenced = async {
        sink.begin().await?;
        sink.put(vec![record(&topic, 6, Some("zombie"))]).await?;
        commit_at(&mut sink, &[SourceOffset { topic: topic.clone(), partition: 0, offset: 6 }]).await
    }
    .await
    .expect_err("the fenced instance cannot commit");
    assert!(matches!(fenced, ConnectError::Fenced { .. }), "{fenced}");
    assert!(fenced.to_string().contains("another instance took it over"), "{fenced}");
    assert!(!fenced.is_retriable());
    second.close().await.unwrap();
    let values: Vec<Vec<u8>> =
        read_all(&b, &remote, true).remove(&0).unwrap().into_iter().map(|(_, r)| r.value.unwrap()).collect();
    assert!(!values.contains(&b"zombie".to_vec()), "the zombie's record never becomes visible");
}

/// Exactly-once, a sink copying batches holds its transactions on its batch producer: records
/// given to it go through it as batches of their own, so an abort hides them and a commit shows
/// them once, with their headers, timestamps (0 kept) and offset syncs; a record it cannot
/// encode stops it, named.
#[tokio::test(flavor = "multi_thread")]
async fn a_transactional_batch_sink_writes_records_given_to_it_in_its_transactions() {
    let f = TopicFlow::new("txbatchsink", 1).await;
    let flow = sink_flow(&f, "offset_lag_max = 3\ndelivery = \"exactly_once\"\ncopy = \"batches\"");
    let (b, src, topic) = (f.b.clone(), f.src.clone(), Arc::<str>::from(f.topic.as_str()));
    let mut sink = start(&flow).await.expect("transactional batch sink starts");
    sink.begin().await.unwrap();
    sink.put((0..6).map(|o| record(&topic, o, Some("aborted"))).collect()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    sink.abort().await.unwrap();
    sink.begin().await.unwrap();
    let mut records: Vec<_> = (0..6).map(|o| record(&topic, o, Some("v"))).collect();
    records[0].timestamp_ms = Some(0);
    sink.put(records).await.unwrap();
    commit_at(&mut sink, &[SourceOffset { topic: topic.clone(), partition: 0, offset: 5 }]).await.unwrap();

    let remote = format!("{src}.{topic}");
    let on_target = read_all(&b, &remote, true).remove(&0).unwrap();
    let got: Vec<(i64, Vec<u8>, Vec<u8>, i64)> =
        on_target.iter().map(|(o, r)| (*o, r.key.clone().unwrap(), r.value.clone().unwrap(), r.timestamp)).collect();
    // Downstream offsets follow the aborted batch's (when it reached the log) and its marker.
    let base = got.first().map_or(0, |r| r.0);
    assert!(base >= 1, "the abort marker comes first");
    let want: Vec<(i64, Vec<u8>, Vec<u8>, i64)> = (0..6)
        .map(|o| {
            (o + base, format!("k{o}").into_bytes(), b"v".to_vec(), if o == 0 { 0 } else { 1_700_000_000_000 + o })
        })
        .collect();
    assert_eq!(got, want, "each committed record once, in order, after the aborted ones and their marker");
    for (_, r) in &on_target {
        let keys: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["h", "strait.provenance"], "the source header, then the provenance header");
    }
    let syncs = written_syncs(&b, &src, &topic);
    assert_eq!(syncs, vec![(0, base), (4, base + 4), (5, base + 5)], "only the committed batch's, where MM2 puts them");
    let saved = positions::load(&flow.target, &flow.name).await.unwrap();
    assert_eq!(saved.get(&(topic.to_string(), 0)).map(|s| s.next_offset), Some(6));

    // A header key twice cannot be written in a batch: the partition stops, naming the record.
    let mut twice = record(&topic, 6, Some("twice"));
    twice.headers.push(Header { key: "h".into(), value: Some(b"again".to_vec()) });
    sink.begin().await.unwrap();
    let refused = sink.put(vec![twice]).await.expect_err("a record naming a header twice is refused");
    assert!(matches!(refused, ConnectError::Invalid { .. }), "{refused}");
    let said = refused.to_string();
    assert!(
        said.contains(&format!("{topic} partition 0")) && said.contains("offset 6 has header h more than once"),
        "{said}"
    );
    sink.abort().await.unwrap();
    sink.close().await.unwrap();
    assert_eq!(read_all(&b, &remote, true).remove(&0).unwrap().len(), 6, "nothing more visible");
}

#[tokio::test(flavor = "multi_thread")]
async fn positions_behind_another_writers_open_transaction_are_read_once_it_ends() {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use std::time::{Duration, Instant};

    let f = TopicFlow::new("lso", 1).await;
    let flow = sink_flow(&f, "delivery = \"exactly_once\"");
    let (b, topic) = (f.b.clone(), Arc::<str>::from(f.topic.as_str()));
    let mut sink = start(&flow).await.expect("transactional sink starts");
    let position = |offset| [SourceOffset { topic: topic.clone(), partition: 0, offset }];
    sink.begin().await.unwrap();
    sink.put((0..3).map(|o| record(&topic, o, Some("v"))).collect()).await.unwrap();
    commit_at(&mut sink, &position(2)).await.unwrap();

    // Another flow writing to the same target leaves a transaction open on the positions topic...
    let other: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("transactional.id", format!("{}-other", f.p))
        .create()
        .unwrap();
    other.init_transactions(Duration::from_secs(30)).unwrap();
    other.begin_transaction().unwrap();
    other.send(BaseRecord::to("strait-positions.internal").partition(0).key("other").payload("{}")).unwrap();
    other.flush(Duration::from_secs(10)).unwrap();
    // ...while this flow commits its next batch, whose position lies after the open transaction.
    sink.begin().await.unwrap();
    sink.put((3..6).map(|o| record(&topic, o, Some("v"))).collect()).await.unwrap();
    commit_at(&mut sink, &position(5)).await.unwrap();
    let aborter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        other.abort_transaction(Duration::from_secs(30)).unwrap();
    });
    let started = Instant::now();
    let saved = positions::load(&flow.target, &flow.name).await.unwrap();
    assert_eq!(
        saved.get(&(topic.to_string(), 0)).map(|s| s.next_offset),
        Some(6),
        "the newest committed position, not the one before the open transaction"
    );
    assert!(started.elapsed() >= Duration::from_secs(2), "read waited for the open transaction to end");
    aborter.join().unwrap();
    sink.close().await.unwrap();
}

/// `crates/strait/examples/replicate.rs`, built next to this test binary by `cargo test`.
fn example_binary(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // <target>/debug/deps/e2e-<hash> → <target>/debug/examples/<name>
    exe.parent().and_then(|deps| deps.parent()).expect("target directory").join("examples").join(name)
}

/// The library contract alone (TargetSink::start, the Sink methods, drain_offset_syncs, a
/// KafkaSource) replicates a topic between the two clusters: the example copies every record, in
/// order per partition, and a second run resumes after them instead of copying them again.
#[tokio::test(flavor = "multi_thread")]
async fn the_replicate_example_copies_a_topic_through_the_spi_alone() {
    let f = TopicFlow::new("spiexample", 3).await;
    let records = |range: std::ops::Range<i32>| -> Vec<Rec> {
        range
            .map(|i| Rec {
                partition: i % 3,
                key: Some(format!("k{i}").into_bytes()),
                value: Some(format!("v{i}").into_bytes()),
                headers: vec![],
                timestamp: 1_700_000_000_000 + i64::from(i),
            })
            .collect()
    };
    let run = |wanted: usize| {
        let bin = example_binary("replicate");
        let args = [f.src.clone(), f.a.clone(), f.dst.clone(), f.b.clone(), f.topic.clone(), wanted.to_string()];
        tokio::task::spawn_blocking(move || {
            let out = std::process::Command::new(&bin)
                .args(&args)
                .output()
                .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
            let stdout = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(out.status.success(), "example failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
            stdout
        })
    };
    // Each partition of the target holds exactly the values of `0..end`'s records, in order. On a
    // failure every partition is described (held, missing, duplicated), so one that lost records
    // tells apart from one whose duplicates made the example stop early.
    let check = |end: i32| {
        let on_target = read_all(&f.b, &f.remote, false);
        let mut wrong = Vec::new();
        for p in 0..3 {
            let values: Vec<Vec<u8>> = on_target[&p].iter().map(|(_, r)| r.value.clone().unwrap()).collect();
            let expected: Vec<Vec<u8>> =
                records(0..end).into_iter().filter(|r| r.partition == p).map(|r| r.value.unwrap()).collect();
            if values != expected {
                let held: std::collections::HashSet<&Vec<u8>> = values.iter().collect();
                let missing = expected.iter().filter(|v| !held.contains(v)).count();
                let duplicated = values.len() - held.len();
                wrong.push(format!(
                    "partition {p}: {} held of {}, {missing} missing, {duplicated} duplicated",
                    values.len(),
                    expected.len()
                ));
            }
        }
        assert!(wrong.is_empty(), "every record once, in order: {}", wrong.join("; "));
    };

    // Every flow also replicates the source's heartbeats topics (MM2's rule), as on a shared
    // cluster other flows' ones: their records are copied too, but are not the topic's.
    let heartbeats = format!("{}o.heartbeats", f.p);
    create_topic(&f.a, &heartbeats, 1, &[]).await;
    produce(&f.a, &heartbeats, &(0..2_000).map(|i| Rec::simple(0, &format!("h{i}"))).collect::<Vec<_>>()).await;
    produce(&f.a, &f.topic, &records(0..600)).await;
    let stdout = run(600).await.unwrap();
    assert!(stdout.contains("copied 600 records"), "{stdout}");
    check(600);
    assert!(!written_syncs(&f.b, &f.src, &f.topic).is_empty(), "offset syncs written");
    assert!(!stdout.contains(" 0 offset syncs"), "the example drained the syncs it wrote: {stdout}");

    // A second run resumes at the saved positions: it copies the 150 new records only.
    produce(&f.a, &f.topic, &records(600..750)).await;
    let stdout = run(150).await.unwrap();
    assert!(stdout.contains("copied 150 records"), "{stdout}");
    check(750);
}
