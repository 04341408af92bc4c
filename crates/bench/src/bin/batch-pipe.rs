//! `batch-pipe SOURCE TARGET PREFIX TOPIC...`: the batch path's ceiling (issue 27). Fetches every
//! partition of the topics from the beginning as the broker stores them (`strait-wire`:
//! `read_committed`, fetch sessions) and produces each data batch as it is, still compressed, to
//! the same partition of `PREFIX<topic>` (idempotent, `acks=all`): no renaming policy, no offset
//! syncs, no positions, no metrics. Fetching and producing overlap: the fetch loop hands each
//! fetch's batches to the producing loop through a queue of 4. Runs until killed.
//!
//! What it leaves out of the batch path to come is its bookkeeping; what it keeps is every byte it
//! would move, so it is to Strait's `copy = "batches"` what `raw-pipe` is to the record path.

use std::collections::BTreeMap;
use std::time::Duration;

use strait_wire::{ClientOptions, Cluster, FetchAt, Outgoing, Producer};
use tokio::sync::mpsc;

// The allocator Strait runs with, as the other pipe.
strait::process_allocator!();

/// The most a partition answers per fetch (bytes), as Kafka's `max.partition.fetch.bytes` default.
const PARTITION_MAX_BYTES: i32 = 1 << 20;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: batch-pipe SOURCE TARGET PREFIX TOPIC...");
        std::process::exit(2);
    }
    let (source, target, prefix, topics) = (&args[0], &args[1], &args[2], &args[3..]);
    let options = ClientOptions::plaintext("batch-pipe", Duration::from_secs(30));
    let mut from = Cluster::connect(source, options.clone()).await.expect("source");
    from.refresh(&topics.iter().map(String::as_str).collect::<Vec<_>>()).await.expect("source metadata");
    let mut next: BTreeMap<(String, i32), (i64, i32)> = BTreeMap::new();
    for t in topics {
        for p in from.partitions(t) {
            next.insert((t.clone(), p), (0, -1));
        }
    }
    let targets: Vec<String> = topics.iter().map(|t| format!("{prefix}{t}")).collect();
    let mut to = Cluster::connect(target, options).await.expect("target");
    to.refresh(&targets.iter().map(String::as_str).collect::<Vec<_>>()).await.expect("target metadata");
    let mut producer = Producer::init(to, Duration::from_secs(120)).await.expect("producer");

    let (batches, mut produce) = mpsc::channel::<Vec<Outgoing>>(4);
    let producing = tokio::spawn(async move {
        while let Some(out) = produce.recv().await {
            producer.produce(&out).await.expect("produced");
        }
    });
    loop {
        let at: Vec<FetchAt> = next
            .iter()
            .map(|((topic, partition), (offset, epoch))| FetchAt {
                topic: topic.clone(),
                topic_id: Default::default(),
                partition: *partition,
                offset: *offset,
                last_fetched_epoch: *epoch,
            })
            .collect();
        let fetched = match from.fetch(&at, Duration::from_millis(500), PARTITION_MAX_BYTES).await {
            Ok(round) => {
                for (broker, e) in round.brokers.iter().filter_map(|(b, r)| Some((b, r.as_ref().err()?))) {
                    eprintln!("fetch from broker {broker} failed, again: {e}");
                }
                round.fetched
            }
            Err(e) => {
                eprintln!("fetch failed, again: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let mut out = Vec::new();
        for f in &fetched {
            if let Some(e) = f.error {
                eprintln!("{}/{}: {e}", f.topic, f.partition);
                continue;
            }
            let Some(last) = f.batches.last() else { continue };
            next.insert((f.topic.clone(), f.partition), (last.last_offset() + 1, last.partition_leader_epoch()));
            let topic = format!("{prefix}{}", f.topic);
            out.extend(f.committed().into_iter().map(|b| Outgoing {
                topic: topic.clone(),
                partition: f.partition,
                batch: b.clone(),
            }));
        }
        if !out.is_empty() && batches.send(out).await.is_err() {
            break;
        }
    }
    producing.await.expect("the producing loop");
}
