use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

use crate::support::*;

const LAG_MAX: i64 = 20;

/// Produces transactions `txs` of 40 records on `topic`, aborting the odd ones.
fn produce_transactions(bootstrap: &str, topic: &str, id: &str, txs: std::ops::Range<usize>) {
    let start = || {
        let p: ThreadedProducer<DefaultProducerContext> =
            ClientConfig::new().set("bootstrap.servers", bootstrap).set("transactional.id", id).create().unwrap();
        p.init_transactions(Duration::from_secs(30)).unwrap();
        p
    };
    let mut p = start();
    for tx in txs {
        p.begin_transaction().unwrap();
        for i in 0..40 {
            let value = format!("tx{tx}-{i}-{}", if tx % 2 == 1 { "aborted" } else { "committed" });
            let key = format!("k{i}");
            p.send(BaseRecord::to(topic).partition(i % 2).key(&key).payload(&value)).unwrap();
        }
        if tx % 2 == 0 {
            p.commit_transaction(Duration::from_secs(30)).unwrap();
        } else if let Err(e) = p.abort_transaction(Duration::from_secs(30)) {
            // Seen on a loaded machine (the broker answered INVALID_TXN_STATE): a new producer
            // of the same transactional.id fences this one and aborts its open transaction.
            eprintln!("abort of transaction {tx} refused ({e}); aborted by a new producer instead");
            p = start();
        }
    }
}

/// Keyed records in several rolled segments so the log cleaner leaves offset gaps.
async fn produce_compactable(bootstrap: &str, topic: &str, rounds: std::ops::Range<usize>) {
    for round in rounds {
        let recs: Vec<Rec> = (0..100)
            .map(|i| Rec {
                key: Some(format!("k{}", i % 30).into_bytes()),
                ..Rec::simple(i % 2, &format!("c{round}-{i}"))
            })
            .collect();
        produce(bootstrap, topic, &recs).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The source records a consumer of `topic` must still see: all of them, or on a compacted topic
/// the newest value per key (compaction on the target may run ahead of the source's and remove
/// older values of a key that the source still holds).
fn must_see(recs: &[(i64, Rec)], compacted: bool) -> Vec<&Vec<u8>> {
    let mut newest: BTreeMap<&Option<Vec<u8>>, &Vec<u8>> = BTreeMap::new();
    let mut all = Vec::new();
    for (_, r) in recs {
        let Some(v) = &r.value else { continue };
        all.push(v);
        newest.insert(&r.key, v);
    }
    if compacted {
        newest.into_values().collect()
    } else {
        all
    }
}

/// Every record of the source topic that a consumer must see is on the target (by value).
fn all_on_target(a: &str, b: &str, topic: &str, remote: &str, compacted: bool) -> bool {
    if !topic_exists(b, remote) {
        return false;
    }
    let on_target: BTreeSet<Vec<u8>> =
        read_all(b, remote, false).into_values().flatten().filter_map(|(_, r)| r.value).collect();
    read_all(a, topic, false).values().all(|recs| must_see(recs, compacted).into_iter().all(|v| on_target.contains(v)))
}

fn has_gaps(recs: &[(i64, Rec)]) -> bool {
    recs.windows(2).any(|w| w[1].0 != w[0].0 + 1) || recs.first().is_some_and(|(o, _)| *o != 0)
}

#[tokio::test(flavor = "multi_thread")]
async fn failover_to_synced_offsets_skips_nothing() {
    failover_skips_nothing("at_least_once").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn failover_exactly_once_skips_nothing() {
    failover_skips_nothing("exactly_once").await;
}

/// A consumer group near the head of compacted (offset gaps) and transactional (markers, aborted
/// records) source topics fails over to the target by its synced offsets, with `delivery`.
async fn failover_skips_nothing(delivery: &str) {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("fo");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let (compacted, transactional) = (format!("{p}-compacted"), format!("{p}-tx"));
    create_topic(
        &a,
        &compacted,
        2,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "200"),
            ("min.cleanable.dirty.ratio", "0.001"),
            ("delete.retention.ms", "100"),
        ],
    )
    .await;
    create_topic(&a, &transactional, 2, &[]).await;
    // Two thirds of the data first; the group consumes most of it while Strait replicates, as a
    // consumer near the head does; the rest arrives later.
    produce_compactable(&a, &compacted, 0..4).await;
    produce_transactions(&a, &transactional, &format!("{p}-txid"), 0..6);
    // One more record per partition rolls the segment so the cleaner can compact the rest.
    produce(
        &a,
        &compacted,
        &[
            Rec { key: Some(b"roll".to_vec()), ..Rec::simple(0, "roll") },
            Rec { key: Some(b"roll".to_vec()), ..Rec::simple(1, "roll") },
        ],
    )
    .await;
    wait_until("compaction leaves offset gaps", Duration::from_secs(60), || {
        read_all(&a, &compacted, false).values().all(|r| has_gaps(r))
    })
    .await;

    let settings = format!(
        "delivery = \"{delivery}\"\ntopics = [\"{p}-.*\"]\noffset_lag_max = {LAG_MAX}\nemit_checkpoints_interval_ms = 1000\nrefresh_groups_interval_ms = 1000\nsync_group_offsets = true\nsync_group_offsets_interval_ms = 1000"
    );
    let config = two_cluster_config((&src, &a, ""), (&dst, &b, ""), &settings, "");
    let strait = Strait::start(&p, &config);
    let remote = |t: &str| format!("{src}.{t}");
    wait_until("first part replicated", Duration::from_secs(60), || {
        [(&compacted, true), (&transactional, false)].iter().all(|(t, c)| all_on_target(&a, &b, t, &remote(t), *c))
    })
    .await;

    // The group has consumed 90% of what is there: 60% of the final data (read_committed, as
    // librdkafka reads), and commits.
    let group = format!("{p}-g");
    let mut commits = Vec::new();
    for t in [&compacted, &transactional] {
        for (part, recs) in read_all(&a, t, false) {
            commits.push((t.clone(), part, recs[recs.len() * 9 / 10].0));
        }
    }
    let commit_refs: Vec<(&str, i32, i64)> = commits.iter().map(|(t, p, o)| (t.as_str(), *p, *o)).collect();
    commit_group(&a, &group, &commit_refs);
    let config_path = write_config(&format!("{p}-cli"), &config);
    wait_until("group offsets synced to the target as translated", Duration::from_secs(90), || {
        let want = translate_cli(&config_path, &format!("{src}->{dst}"), &group);
        want.len() == 4
            && want
                .iter()
                .all(|((t, part), (_, down))| down.is_some() && committed(&b, &group, t, 2).get(part) == down.as_ref())
    })
    .await;
    produce_compactable(&a, &compacted, 4..6).await;
    produce_transactions(&a, &transactional, &format!("{p}-txid"), 6..8);
    wait_until("everything replicated", Duration::from_secs(60), || {
        [(&compacted, true), (&transactional, false)].iter().all(|(t, c)| all_on_target(&a, &b, t, &remote(t), *c))
    })
    .await;
    assert!(strait.stop().success());
    let mut source: BTreeMap<(String, i32), Vec<(i64, Rec)>> = BTreeMap::new();
    for t in [&compacted, &transactional] {
        for (part, recs) in read_all(&a, t, false) {
            source.insert((t.clone(), part), recs);
        }
    }

    // Fail over: a consumer on the target starts from the synced offsets.
    for (t, part, g) in &commits {
        let remote = format!("{src}.{t}");
        let start = committed(&b, &group, &remote, 2)[part];
        let target = read_all(&b, &remote, false).remove(part).unwrap();
        let read: Vec<Vec<u8>> =
            target.iter().filter(|(o, _)| *o >= start).map(|(_, r)| r.value.clone().unwrap()).collect();
        let read_set: BTreeSet<&Vec<u8>> = read.iter().collect();
        let recs = &source[&(t.clone(), *part)];
        let remaining: Vec<(i64, Rec)> = recs.iter().filter(|(o, _)| o >= g).cloned().collect();
        let skipped: Vec<&Vec<u8>> =
            must_see(&remaining, t == &compacted).into_iter().filter(|v| !read_set.contains(*v)).collect();
        assert!(skipped.is_empty(), "{t} partition {part}: {} records skipped after failover", skipped.len());
        // Records read that the group had already consumed on the source.
        let remaining_set: BTreeSet<&Vec<u8>> = remaining.iter().filter_map(|(_, r)| r.value.as_ref()).collect();
        let rereads = read.iter().filter(|v| !remaining_set.contains(v)).count();
        eprintln!(
            "{t} partition {part}: committed {g} on the source, synced {start} on the target, {rereads} re-reads"
        );
        assert!(rereads as i64 <= LAG_MAX, "{t} partition {part}: {rereads} re-reads exceed offset_lag_max");
        assert!(
            read.iter().all(|v| !String::from_utf8_lossy(v).contains("aborted")),
            "aborted records never reach the target"
        );
    }
}
