//! Replicates the first `records` records of one topic between two Kafka clusters through
//! Strait's connector SPI alone: a [`KafkaSource`] polled by hand into a [`TargetSink`] — `begin`,
//! `put`, `stage_positions`, `commit` per batch, the positions acknowledged back to the source,
//! the offset syncs drained — then both closed. The records land in `<source-alias>.<topic>` on
//! the target (MM2's default naming), with offset syncs and saved positions, as `strait run`
//! writes them; run it again and it resumes after them. Like every flow, it also replicates the
//! source's heartbeats topics (MM2's rule); their records are not counted. Whichever kind the
//! flow copies (`copy = "auto"` takes batches where it can), the loop is the same: a batch flow's
//! source yields one [`ConnectRecord`] per source record batch, carrying the batch's records.
//!
//! ```text
//! cargo run --example replicate -- <source-alias> <source-bootstrap> <target-alias> <target-bootstrap> <topic> <records>
//! ```
//!
//! Prints `copied <n> records, <m> offset syncs` (`n` of the topic); exits non-zero naming what
//! failed, or when fewer than `records` records of the topic arrived within two minutes.

use std::collections::BTreeMap;
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strait::config::Config;
use strait::record::ReplicatedRecord;
use strait::sink::{SinkParams, TargetSink};
use strait::source::KafkaSource;
use strait::watch::Committed;
use strait_connect::{ConnectRecord, Sink, Source, SourceOffset};

/// How long the example waits for the records before it gives up.
const DEADLINE: Duration = Duration::from_secs(120);

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [src, src_servers, dst, dst_servers, topic, records] = &args[..] else {
        return Err(
            "usage: replicate <source-alias> <source-bootstrap> <target-alias> <target-bootstrap> <topic> <records>"
                .into(),
        );
    };
    let wanted: usize = records.parse().map_err(|e| format!("records {records:?}: {e}"))?;
    let config = format!(
        "[[clusters]]\nalias = \"{src}\"\nbootstrap_servers = \"{src_servers}\"\n\n\
         [[clusters]]\nalias = \"{dst}\"\nbootstrap_servers = \"{dst_servers}\"\n\n\
         [[flows]]\nsource = \"{src}\"\ntarget = \"{dst}\"\ntopics = [\"{topic}\"]\n"
    );
    let flow = Arc::new(Config::parse(&config)?.into_iter().next().ok_or("the config holds no flow")?);

    // The sink first: it fences the slot's previous owner; then the positions it left, where the
    // source starts.
    let mut sink = TargetSink::start(SinkParams { flow: flow.clone(), slot: 0 }).await?;
    let stored = strait::resume::load::stored(&flow, 0).await?;
    let mut source = KafkaSource::start(flow, 0, stored, Committed::default(), sink.topic_ids()).await?;
    // The first drain turns keeping offset syncs on.
    let mut syncs = sink.drain_offset_syncs().len();

    let (mut copied, started) = (0, Instant::now());
    while copied < wanted {
        if started.elapsed() > DEADLINE {
            return Err(format!("only {copied} of {wanted} records arrived in {} s", DEADLINE.as_secs()).into());
        }
        let batch = source.poll(wanted - copied, 1 << 20, Duration::from_millis(500)).await?;
        if batch.is_empty() {
            continue;
        }
        // The last offset per partition: where a restart resumes after this batch.
        let mut last = BTreeMap::new();
        for r in &batch {
            last.insert((r.source_offset.topic.clone(), r.source_offset.partition), r.source_offset.offset);
        }
        let positions: Vec<SourceOffset> =
            last.into_iter().map(|((topic, partition), offset)| SourceOffset { topic, partition, offset }).collect();
        copied += batch.iter().filter(|r| *r.source_offset.topic == **topic).map(records_in).sum::<usize>();
        sink.begin().await?;
        sink.put(batch).await?;
        sink.stage_positions(&positions);
        sink.commit().await?;
        source.acknowledge(&positions).await?;
        syncs += sink.drain_offset_syncs().len();
    }
    // At-least-once, the last batch's offset syncs and positions are written once close returns.
    sink.close().await?;
    source.close().await?;
    syncs += sink.drain_offset_syncs().len();
    println!("copied {copied} records, {syncs} offset syncs");
    Ok(())
}

/// The source records `record` carries: a whole batch's when the flow copies batches, else one.
fn records_in(record: &ConnectRecord<(), ReplicatedRecord>) -> usize {
    match &record.value {
        Some(ReplicatedRecord::Batch(batch)) => usize::try_from(batch.record_count()).unwrap_or(0),
        _ => 1,
    }
}
