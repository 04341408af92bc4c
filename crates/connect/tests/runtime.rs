//! The runtime's contract, with in-memory connectors: checkpoints never run ahead of durability,
//! batches stay bounded, failures stop the runtime with the cause, shutdown drains.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use strait_connect::*;

#[derive(Default)]
struct Shared {
    /// Highest offset per partition the sink made durable.
    durable: BTreeMap<i32, i64>,
    /// Highest offset per partition the source saved.
    saved: BTreeMap<i32, i64>,
    /// Most records ever held by the sink between flushes.
    peak_unflushed: usize,
    violations: Vec<String>,
    closed: usize,
}

struct MemSource {
    next: i64,
    end: i64,
    partitions: i32,
    shared: Arc<Mutex<Shared>>,
}

#[async_trait]
impl Source<(), u64> for MemSource {
    async fn poll(&mut self, max_records: usize, _max_bytes: usize, timeout: Duration) -> ConnectResult<Vec<ConnectRecord<(), u64>>> {
        if self.next >= self.end {
            tokio::time::sleep(timeout).await;
            return Ok(vec![]);
        }
        let n = (max_records as i64).min(self.end - self.next).min(700);
        let out = (self.next..self.next + n)
            .map(|i| ConnectRecord {
                key: None,
                value: Some(i as u64),
                timestamp_ms: Some(i),
                headers: vec![],
                source_offset: SourceOffset { topic: "t".into(), partition: (i % self.partitions as i64) as i32, offset: i / self.partitions as i64 },
                size_bytes: 10,
            })
            .collect();
        self.next += n;
        Ok(out)
    }
    async fn checkpoint(&mut self, positions: &[SourceOffset]) -> ConnectResult<()> {
        let mut s = self.shared.lock().unwrap();
        for p in positions {
            let durable = s.durable.get(&p.partition).copied().unwrap_or(-1);
            if p.offset > durable {
                s.violations.push(format!("saved {p:?} but durable only to {durable}"));
            }
            s.saved.insert(p.partition, p.offset);
        }
        Ok(())
    }
    async fn seek(&mut self, _position: &SourceOffset) -> ConnectResult<()> {
        Ok(())
    }
    async fn acknowledge(&mut self, _positions: &[SourceOffset]) -> ConnectResult<()> {
        Ok(())
    }
    async fn close(&mut self) -> ConnectResult<()> {
        self.shared.lock().unwrap().closed += 1;
        Ok(())
    }
}

struct MemSink {
    unflushed: Vec<SourceOffset>,
    fail_flush_after: Option<usize>,
    flushes: usize,
    shared: Arc<Mutex<Shared>>,
}

#[async_trait]
impl Sink<(), u64> for MemSink {
    async fn put(&mut self, batch: Vec<ConnectRecord<(), u64>>) -> ConnectResult<()> {
        self.unflushed.extend(batch.into_iter().map(|r| r.source_offset));
        let mut s = self.shared.lock().unwrap();
        s.peak_unflushed = s.peak_unflushed.max(self.unflushed.len());
        Ok(())
    }
    async fn flush(&mut self) -> ConnectResult<()> {
        self.flushes += 1;
        if self.fail_flush_after.is_some_and(|n| self.flushes > n) {
            return Err(ConnectError::backend("topic t partition 0 offset 7", "broker said no"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        let mut s = self.shared.lock().unwrap();
        for o in self.unflushed.drain(..) {
            let e = s.durable.entry(o.partition).or_insert(-1);
            *e = (*e).max(o.offset);
        }
        Ok(())
    }
    async fn close(&mut self) -> ConnectResult<()> {
        self.shared.lock().unwrap().closed += 1;
        Ok(())
    }
}

type Setup = (ConnectorRuntime<(), u64, MemSource, MemSink>, RuntimeHandle, Arc<Mutex<Shared>>);

fn setup(end: i64, fail_flush_after: Option<usize>, config: RuntimeConfig) -> Setup {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let source = MemSource { next: 0, end, partitions: 3, shared: shared.clone() };
    let sink = MemSink { unflushed: vec![], fail_flush_after, flushes: 0, shared: shared.clone() };
    let (rt, handle) = ConnectorRuntime::new(source, sink, config);
    (rt, handle, shared)
}

fn small_batches() -> RuntimeConfig {
    RuntimeConfig { max_batch_records: 1_000, max_batch_bytes: 1 << 20, max_batch_wait: Duration::from_millis(50), poll_timeout: Duration::from_millis(10), max_poll_bytes: 1 << 20 }
}

#[tokio::test]
async fn checkpoint_never_covers_undurable_records_and_shutdown_drains() {
    let (rt, mut handle, shared) = setup(30_000, None, small_batches());
    let task = tokio::spawn(rt.run());
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if shared.lock().unwrap().saved.values().sum::<i64>() >= 29_997 {
            break;
        }
    }
    handle.shutdown();
    let state = task.await.unwrap();
    assert!(matches!(state, RuntimeState::Stopped), "{state:?}");
    assert!(matches!(handle.wait_for(|s| matches!(s, RuntimeState::Stopped)).await, RuntimeState::Stopped));
    let s = shared.lock().unwrap();
    assert!(s.violations.is_empty(), "{:?}", s.violations);
    assert_eq!(s.saved, BTreeMap::from([(0, 9_999), (1, 9_999), (2, 9_999)]));
    assert!(s.peak_unflushed <= 1_000, "batch bound exceeded: {}", s.peak_unflushed);
    assert_eq!(s.closed, 2, "source and sink both closed");
}

#[tokio::test]
async fn sink_failure_stops_in_failed_state_without_saving_the_batch() {
    let (rt, _handle, shared) = setup(30_000, Some(2), small_batches());
    let state = tokio::time::timeout(Duration::from_secs(10), rt.run()).await.expect("runtime stops on error");
    match state {
        RuntimeState::Failed(e) => assert!(e.to_string().contains("topic t partition 0 offset 7"), "{e}"),
        other => panic!("expected Failed, got {other:?}"),
    }
    let s = shared.lock().unwrap();
    assert!(s.violations.is_empty(), "{:?}", s.violations);
    let saved: i64 = s.saved.values().map(|o| o + 1).sum();
    assert_eq!(saved, 2_000, "exactly the two flushed batches are saved");
}

#[tokio::test]
async fn pause_commits_and_stops_polling_until_resumed() {
    let (rt, mut handle, shared) = setup(1_000_000, None, small_batches());
    let task = tokio::spawn(rt.run());
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.pause();
    handle.wait_for(|s| matches!(s, RuntimeState::Paused)).await;
    let frozen = shared.lock().unwrap().saved.clone();
    assert!(!frozen.is_empty());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(shared.lock().unwrap().saved, frozen, "nothing moves while paused");
    assert_eq!(shared.lock().unwrap().durable, frozen, "pause committed everything put");
    handle.resume();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_ne!(shared.lock().unwrap().saved, frozen, "resumed");
    handle.shutdown();
    assert!(matches!(task.await.unwrap(), RuntimeState::Stopped));
    assert!(shared.lock().unwrap().violations.is_empty());
}
