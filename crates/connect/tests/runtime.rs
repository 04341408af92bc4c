//! The runtime's contract, with in-memory connectors: positions never run ahead of durability,
//! batches stay bounded, failures stop the runtime with the cause, shutdown drains, and a
//! transactional sink's retriable failures are aborted, rewound and retried without a duplicate,
//! and a sink with only the seed's methods (`put`, `flush`, `close`) is committed through `flush`.
//! A transactional sink's batch is committed once the source is drained (past the floor), a
//! catch-up's only when full. A sink that ends its batches behind is flushed once the source has
//! nothing to read, and at shutdown.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use strait_connect::*;

#[derive(Default)]
struct Shared {
    /// Every record the sink made durable (committed), per partition, in order.
    durable: BTreeMap<i32, Vec<i64>>,
    /// Last offset per partition whose position the sink saved.
    saved: BTreeMap<i32, i64>,
    /// Most records ever held by the sink between commits.
    peak_uncommitted: usize,
    violations: Vec<String>,
    closed: usize,
    aborts: usize,
    rewinds: usize,
    /// Records made durable and flushes, of a [`FlushOnlySink`] or a [`BehindSink`].
    flushed: usize,
    flushes: usize,
    /// Batches a [`BehindSink`] ended behind (`commit_behind`).
    behind_commits: usize,
    /// Records of each commit of a [`MemSink`], in order.
    committed_batches: Vec<usize>,
}

/// Records `0..end` over `partitions` partitions (offset = n / partitions), of 10 bytes each, as
/// many per poll as allowed (a catch-up); rewinds to the last acknowledged position like a Kafka
/// consumer seeking back.
struct MemSource {
    next: i64,
    acknowledged: i64,
    end: i64,
    partitions: i32,
    /// How long each poll with records takes (reading a broker's fetch, say).
    pause: Duration,
    shared: Arc<Mutex<Shared>>,
}

#[async_trait]
impl Source<(), u64> for MemSource {
    async fn poll(
        &mut self,
        max_records: usize,
        max_bytes: usize,
        timeout: Duration,
    ) -> ConnectResult<Vec<ConnectRecord<(), u64>>> {
        if self.next >= self.end {
            tokio::time::sleep(timeout).await;
            return Ok(vec![]);
        }
        tokio::time::sleep(self.pause).await;
        let n = (max_records as i64).min(self.end - self.next).min(max_bytes.div_ceil(10) as i64);
        let out = (self.next..self.next + n)
            .map(|i| ConnectRecord {
                key: None,
                value: Some(i as u64),
                timestamp_ms: Some(i),
                headers: vec![],
                source_offset: SourceOffset {
                    topic: "t".into(),
                    partition: (i % self.partitions as i64) as i32,
                    offset: i / self.partitions as i64,
                },
                size_bytes: 10,
            })
            .collect();
        self.next += n;
        Ok(out)
    }
    async fn acknowledge(&mut self, positions: &[SourceOffset]) -> ConnectResult<()> {
        // Records are spread round-robin, so the highest acknowledged record is the resume point.
        if let Some(n) = positions.iter().map(|p| p.offset * self.partitions as i64 + p.partition as i64).max() {
            self.acknowledged = self.acknowledged.max(n + 1);
        }
        Ok(())
    }
    async fn rewind(&mut self) -> ConnectResult<()> {
        self.shared.lock().unwrap().rewinds += 1;
        self.next = self.acknowledged;
        Ok(())
    }
    async fn close(&mut self) -> ConnectResult<()> {
        self.shared.lock().unwrap().closed += 1;
        Ok(())
    }
}

/// How a [`MemSink`] fails.
#[derive(Clone, Copy)]
enum Failure {
    None,
    /// Every commit after the first `n` fails for good.
    PermanentAfter(usize),
    /// Every `n`-th put fails with a retriable error (transactional sinks only).
    RetriableEvery(usize),
}

struct MemSink {
    uncommitted: Vec<SourceOffset>,
    /// Positions staged for the next commit.
    staged: Vec<SourceOffset>,
    transactional: bool,
    in_transaction: bool,
    failure: Failure,
    commits: usize,
    puts: usize,
    shared: Arc<Mutex<Shared>>,
}

#[async_trait]
impl Sink<(), u64> for MemSink {
    async fn put(&mut self, batch: Vec<ConnectRecord<(), u64>>) -> ConnectResult<()> {
        if self.transactional && !self.in_transaction {
            self.shared.lock().unwrap().violations.push("put outside a transaction".into());
        }
        self.puts += 1;
        self.uncommitted.extend(batch.into_iter().map(|r| r.source_offset));
        let mut s = self.shared.lock().unwrap();
        s.peak_uncommitted = s.peak_uncommitted.max(self.uncommitted.len());
        match self.failure {
            Failure::RetriableEvery(n) if self.puts.is_multiple_of(n) => {
                Err(ConnectError::retriable("topic t", "leader moved"))
            }
            _ => Ok(()),
        }
    }
    fn stage_positions(&mut self, positions: &[SourceOffset]) {
        self.staged = positions.to_vec();
    }
    /// The commit too (`Sink::commit`'s default): records made durable, then the staged positions saved.
    async fn flush(&mut self) -> ConnectResult<()> {
        self.commits += 1;
        if matches!(self.failure, Failure::PermanentAfter(n) if self.commits > n) {
            return Err(ConnectError::backend("topic t partition 0 offset 7", "broker said no"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        let mut s = self.shared.lock().unwrap();
        s.committed_batches.push(self.uncommitted.len());
        for o in self.uncommitted.drain(..) {
            s.durable.entry(o.partition).or_default().push(o.offset);
        }
        for p in self.staged.drain(..) {
            let durable = s.durable.get(&p.partition).and_then(|v| v.last().copied()).unwrap_or(-1);
            if p.offset > durable {
                s.violations.push(format!("saved {p:?} but durable only to {durable}"));
            }
            s.saved.insert(p.partition, p.offset);
        }
        self.in_transaction = false;
        Ok(())
    }
    fn supports_transactions(&self) -> bool {
        self.transactional
    }
    async fn begin(&mut self) -> ConnectResult<()> {
        if self.in_transaction {
            self.shared.lock().unwrap().violations.push("begin inside a transaction".into());
        }
        self.in_transaction = self.transactional;
        Ok(())
    }
    async fn abort(&mut self) -> ConnectResult<()> {
        self.shared.lock().unwrap().aborts += 1;
        self.uncommitted.clear();
        self.staged.clear();
        self.in_transaction = false;
        Ok(())
    }
    async fn close(&mut self) -> ConnectResult<()> {
        self.shared.lock().unwrap().closed += 1;
        Ok(())
    }
}

type Setup = (ConnectorRuntime<(), u64, MemSource, MemSink>, RuntimeHandle, Arc<Mutex<Shared>>);

fn mem_sink(transactional: bool, failure: Failure, shared: &Arc<Mutex<Shared>>) -> MemSink {
    MemSink {
        uncommitted: vec![],
        staged: vec![],
        transactional,
        in_transaction: false,
        failure,
        commits: 0,
        puts: 0,
        shared: shared.clone(),
    }
}

fn setup(end: i64, transactional: bool, failure: Failure, config: RuntimeConfig) -> Setup {
    setup_paced(end, Duration::ZERO, transactional, failure, config)
}

/// [`setup`] with a source whose polls take `pause` each.
fn setup_paced(end: i64, pause: Duration, transactional: bool, failure: Failure, config: RuntimeConfig) -> Setup {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let source = MemSource { next: 0, acknowledged: 0, end, partitions: 3, pause, shared: shared.clone() };
    let (rt, handle) = ConnectorRuntime::new(source, mem_sink(transactional, failure, &shared), config);
    (rt, handle, shared)
}

fn small_batches() -> RuntimeConfig {
    RuntimeConfig {
        max_batch_records: 1_000,
        max_batch_bytes: 1 << 20,
        max_batch_wait: Duration::from_millis(50),
        min_batch_wait: Duration::from_millis(20),
        poll_timeout: Duration::from_millis(10),
        // 700 records of [`MemSource`] per poll: a batch takes several.
        max_poll_bytes: 7_000,
        retry_backoff: Duration::from_millis(1),
        max_retry_backoff: Duration::from_millis(4),
    }
}

async fn run_until_saved(
    rt: ConnectorRuntime<(), u64, MemSource, MemSink>,
    handle: &RuntimeHandle,
    shared: &Arc<Mutex<Shared>>,
) -> RuntimeState {
    let task = tokio::spawn(rt.run());
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if shared.lock().unwrap().saved.values().sum::<i64>() >= 29_997 || task.is_finished() {
            break;
        }
    }
    handle.shutdown();
    task.await.unwrap()
}

#[tokio::test]
async fn positions_never_cover_undurable_records_and_shutdown_drains() {
    let (rt, mut handle, shared) = setup(30_000, false, Failure::None, small_batches());
    let state = run_until_saved(rt, &handle, &shared).await;
    assert!(matches!(state, RuntimeState::Stopped), "{state:?}");
    assert!(matches!(handle.wait_for(|s| matches!(s, RuntimeState::Stopped)).await, RuntimeState::Stopped));
    let s = shared.lock().unwrap();
    assert!(s.violations.is_empty(), "{:?}", s.violations);
    assert_eq!(s.saved, BTreeMap::from([(0, 9_999), (1, 9_999), (2, 9_999)]));
    assert!(s.peak_uncommitted <= 1_000, "batch bound exceeded: {}", s.peak_uncommitted);
    assert_eq!(s.closed, 2, "source and sink both closed");
}

#[tokio::test]
async fn sink_failure_stops_in_failed_state_without_saving_the_batch() {
    let (rt, _handle, shared) = setup(30_000, false, Failure::PermanentAfter(2), small_batches());
    let state = tokio::time::timeout(Duration::from_secs(10), rt.run()).await.expect("runtime stops on error");
    match state {
        RuntimeState::Failed(e) => assert!(e.to_string().contains("topic t partition 0 offset 7"), "{e}"),
        other => panic!("expected Failed, got {other:?}"),
    }
    let s = shared.lock().unwrap();
    assert!(s.violations.is_empty(), "{:?}", s.violations);
    let saved: i64 = s.saved.values().map(|o| o + 1).sum();
    assert_eq!(saved, 2_000, "exactly the two committed batches are saved");
}

#[tokio::test]
async fn retriable_error_without_transactions_stops_the_runtime() {
    // Records already written cannot be taken back without transactions: stop, never skip.
    let (rt, _handle, shared) = setup(30_000, false, Failure::RetriableEvery(5), small_batches());
    let state = tokio::time::timeout(Duration::from_secs(10), rt.run()).await.expect("runtime stops on error");
    assert!(matches!(state, RuntimeState::Failed(ref e) if e.is_retriable()), "{state:?}");
    assert_eq!(shared.lock().unwrap().rewinds, 0);
}

#[tokio::test]
async fn transactional_retries_abort_rewind_and_commit_each_record_once_in_order() {
    let (rt, handle, shared) = setup(30_000, true, Failure::RetriableEvery(7), small_batches());
    let state = run_until_saved(rt, &handle, &shared).await;
    assert!(matches!(state, RuntimeState::Stopped), "{state:?}");
    let s = shared.lock().unwrap();
    assert!(s.violations.is_empty(), "{:?}", s.violations);
    assert!(s.aborts >= 3 && s.rewinds == s.aborts, "aborts {} rewinds {}", s.aborts, s.rewinds);
    assert_eq!(s.saved, BTreeMap::from([(0, 9_999), (1, 9_999), (2, 9_999)]));
    for (p, offsets) in &s.durable {
        assert_eq!(offsets, &(0..10_000).collect::<Vec<i64>>(), "partition {p}: every record committed once, in order");
    }
}

#[tokio::test]
async fn pause_commits_and_stops_polling_until_resumed() {
    let (rt, mut handle, shared) = setup(1_000_000, false, Failure::None, small_batches());
    let task = tokio::spawn(rt.run());
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.pause();
    handle.wait_for(|s| matches!(s, RuntimeState::Paused)).await;
    let frozen = shared.lock().unwrap().saved.clone();
    assert!(!frozen.is_empty());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(shared.lock().unwrap().saved, frozen, "nothing moves while paused");
    let durable: BTreeMap<i32, i64> =
        shared.lock().unwrap().durable.iter().map(|(p, v)| (*p, *v.last().unwrap())).collect();
    assert_eq!(durable, frozen, "pause committed everything put");
    handle.resume();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_ne!(shared.lock().unwrap().saved, frozen, "resumed");
    handle.shutdown();
    assert!(matches!(task.await.unwrap(), RuntimeState::Stopped));
    assert!(shared.lock().unwrap().violations.is_empty());
}

/// The seed's sink: only `put`, `flush` and `close`; every other method is the trait's default.
struct FlushOnlySink {
    unflushed: usize,
    shared: Arc<Mutex<Shared>>,
}

#[async_trait]
impl Sink<(), u64> for FlushOnlySink {
    async fn put(&mut self, batch: Vec<ConnectRecord<(), u64>>) -> ConnectResult<()> {
        self.unflushed += batch.len();
        Ok(())
    }
    async fn flush(&mut self) -> ConnectResult<()> {
        let mut s = self.shared.lock().unwrap();
        s.peak_uncommitted = s.peak_uncommitted.max(self.unflushed);
        s.flushed += std::mem::take(&mut self.unflushed);
        s.flushes += 1;
        Ok(())
    }
    async fn close(&mut self) -> ConnectResult<()> {
        self.shared.lock().unwrap().closed += 1;
        Ok(())
    }
}

#[tokio::test]
async fn a_sink_with_the_default_commit_is_flushed_once_per_batch() {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let source = MemSource {
        next: 0,
        acknowledged: 0,
        end: 30_000,
        partitions: 3,
        pause: Duration::ZERO,
        shared: shared.clone(),
    };
    let sink = FlushOnlySink { unflushed: 0, shared: shared.clone() };
    let (rt, handle) = ConnectorRuntime::new(source, sink, small_batches());
    let task = tokio::spawn(rt.run());
    while shared.lock().unwrap().flushed < 30_000 && !task.is_finished() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    handle.shutdown();
    assert!(matches!(task.await.unwrap(), RuntimeState::Stopped));
    let s = shared.lock().unwrap();
    assert_eq!(s.flushed, 30_000, "every record flushed by the default commit");
    assert!(s.peak_uncommitted <= 1_000, "one flush per batch of at most 1,000: {}", s.peak_uncommitted);
    assert!(s.flushes >= 30, "a flush per batch: {}", s.flushes);
    assert_eq!(s.closed, 2);
}

/// Ends each batch behind: its records stay pending (sent, not yet acknowledged) until `flush`.
struct BehindSink {
    pending: usize,
    shared: Arc<Mutex<Shared>>,
}

#[async_trait]
impl Sink<(), u64> for BehindSink {
    async fn put(&mut self, batch: Vec<ConnectRecord<(), u64>>) -> ConnectResult<()> {
        self.pending += batch.len();
        Ok(())
    }
    async fn commit_behind(&mut self) -> ConnectResult<()> {
        self.shared.lock().unwrap().behind_commits += 1;
        Ok(())
    }
    fn behind(&self) -> bool {
        self.pending > 0
    }
    async fn flush(&mut self) -> ConnectResult<()> {
        let mut s = self.shared.lock().unwrap();
        s.flushed += std::mem::take(&mut self.pending);
        s.flushes += 1;
        Ok(())
    }
    async fn close(&mut self) -> ConnectResult<()> {
        self.shared.lock().unwrap().closed += 1;
        Ok(())
    }
}

type BehindSetup = (ConnectorRuntime<(), u64, MemSource, BehindSink>, RuntimeHandle, Arc<Mutex<Shared>>);

/// A runtime over a [`MemSource`] of `end` records into a [`BehindSink`].
fn behind_setup(end: i64) -> BehindSetup {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let source =
        MemSource { next: 0, acknowledged: 0, end, partitions: 3, pause: Duration::ZERO, shared: shared.clone() };
    let sink = BehindSink { pending: 0, shared: shared.clone() };
    let (rt, handle) = ConnectorRuntime::new(source, sink, small_batches());
    (rt, handle, shared)
}

#[tokio::test]
async fn a_sink_behind_is_flushed_once_the_source_has_nothing_to_read() {
    let (rt, handle, shared) = behind_setup(30_000);
    let task = tokio::spawn(rt.run());
    for _ in 0..250 {
        if shared.lock().unwrap().flushed == 30_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    {
        let s = shared.lock().unwrap();
        assert_eq!(s.flushed, 30_000, "every record flushed while running, none left behind");
        assert!(s.behind_commits >= 30, "batches of at most 1,000 ended behind: {}", s.behind_commits);
        assert!(s.flushes < s.behind_commits, "not a flush per batch: {} flushes", s.flushes);
    }
    handle.shutdown();
    assert!(matches!(task.await.unwrap(), RuntimeState::Stopped));
    assert_eq!(shared.lock().unwrap().closed, 2, "source and sink closed");
}

#[tokio::test]
async fn a_sink_behind_is_flushed_at_shutdown() {
    // A source that never runs dry: only the shutdown can flush what the last batch left behind.
    let (rt, handle, shared) = behind_setup(i64::MAX);
    let task = tokio::spawn(rt.run());
    while shared.lock().unwrap().behind_commits < 5 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    handle.shutdown();
    assert!(matches!(task.await.unwrap(), RuntimeState::Stopped));
    let s = shared.lock().unwrap();
    assert!(s.flushes >= 1, "the shutdown flushed what was behind");
    assert!(s.flushed > 0);
}

/// What [`StartSource`] and [`StartSink`] saw.
#[derive(Default)]
struct Starts {
    committed: Vec<Vec<SourceOffset>>,
    acknowledged: Vec<Vec<SourceOffset>>,
    puts: usize,
}

/// A source whose partition 0 starts at its end (offset 42) and has no record; partition 1
/// starts at offset 42 too but has its record 45 in the first poll.
struct StartSource {
    polls: usize,
    starts: Arc<Mutex<Starts>>,
}

fn at(partition: i32, offset: i64) -> SourceOffset {
    SourceOffset { topic: "t".into(), partition, offset }
}

#[async_trait]
impl Source<(), u64> for StartSource {
    async fn poll(&mut self, _: usize, _: usize, timeout: Duration) -> ConnectResult<Vec<ConnectRecord<(), u64>>> {
        self.polls += 1;
        if self.polls > 1 {
            tokio::time::sleep(timeout).await;
            return Ok(vec![]);
        }
        let record = ConnectRecord {
            key: None,
            value: Some(45),
            timestamp_ms: None,
            headers: vec![],
            source_offset: at(1, 45),
            size_bytes: 10,
        };
        Ok(vec![record])
    }
    fn positions_without_records(&mut self) -> Vec<SourceOffset> {
        if self.polls == 1 {
            vec![at(0, 41), at(1, 41)]
        } else {
            vec![]
        }
    }
    async fn acknowledge(&mut self, positions: &[SourceOffset]) -> ConnectResult<()> {
        self.starts.lock().unwrap().acknowledged.push(positions.to_vec());
        Ok(())
    }
    async fn rewind(&mut self) -> ConnectResult<()> {
        Ok(())
    }
    async fn close(&mut self) -> ConnectResult<()> {
        Ok(())
    }
}

struct StartSink(Arc<Mutex<Starts>>);

#[async_trait]
impl Sink<(), u64> for StartSink {
    async fn put(&mut self, _: Vec<ConnectRecord<(), u64>>) -> ConnectResult<()> {
        self.0.lock().unwrap().puts += 1;
        Ok(())
    }
    fn stage_positions(&mut self, positions: &[SourceOffset]) {
        self.0.lock().unwrap().committed.push(positions.to_vec());
    }
    async fn flush(&mut self) -> ConnectResult<()> {
        Ok(())
    }
    async fn close(&mut self) -> ConnectResult<()> {
        Ok(())
    }
}

#[tokio::test]
async fn positions_without_records_are_committed_behind_the_records_and_acknowledged() {
    let starts = Arc::new(Mutex::new(Starts::default()));
    let source = StartSource { polls: 0, starts: starts.clone() };
    let (rt, handle) = ConnectorRuntime::new(source, StartSink(starts.clone()), small_batches());
    let task = tokio::spawn(rt.run());
    for _ in 0..250 {
        if !starts.lock().unwrap().acknowledged.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    handle.shutdown();
    assert!(matches!(task.await.unwrap(), RuntimeState::Stopped));
    let s = starts.lock().unwrap();
    // Partition 0's start is saved with no record; partition 1's record is further on than its start.
    assert_eq!(s.committed, vec![vec![at(0, 41), at(1, 45)]]);
    assert_eq!(s.acknowledged, s.committed, "acknowledged once committed");
    assert_eq!(s.puts, 1, "only the record is put");
}

/// Records of partition 0 that the test hands over one by one ([`FedSource::available`] is the
/// count written so far), as a source at rest that gets a record now and then.
struct FedSource {
    next: i64,
    available: Arc<Mutex<i64>>,
}

#[async_trait]
impl Source<(), u64> for FedSource {
    async fn poll(
        &mut self,
        max_records: usize,
        _: usize,
        timeout: Duration,
    ) -> ConnectResult<Vec<ConnectRecord<(), u64>>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let available = *self.available.lock().unwrap();
            if available > self.next || tokio::time::Instant::now() >= deadline {
                let end = available.min(self.next + max_records as i64);
                let out = (self.next..end)
                    .map(|i| ConnectRecord {
                        key: None,
                        value: Some(i as u64),
                        timestamp_ms: None,
                        headers: vec![],
                        source_offset: at(0, i),
                        size_bytes: 10,
                    })
                    .collect();
                self.next = end.max(self.next);
                return Ok(out);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    async fn acknowledge(&mut self, _: &[SourceOffset]) -> ConnectResult<()> {
        Ok(())
    }
    async fn rewind(&mut self) -> ConnectResult<()> {
        Ok(())
    }
    async fn close(&mut self) -> ConnectResult<()> {
        Ok(())
    }
}

/// How long each of 5 records, written one at a time to a source at rest, took to be committed
/// with `max_batch_wait` 3 s and the default floor (20 ms).
async fn commit_latencies(transactional: bool) -> Vec<Duration> {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let available = Arc::new(Mutex::new(0));
    let source = FedSource { next: 0, available: available.clone() };
    let config = RuntimeConfig { max_batch_wait: Duration::from_secs(3), ..small_batches() };
    let (rt, handle) = ConnectorRuntime::new(source, mem_sink(transactional, Failure::None, &shared), config);
    let task = tokio::spawn(rt.run());
    let mut latencies = Vec::new();
    for n in 0..5 {
        let written = std::time::Instant::now();
        *available.lock().unwrap() = n + 1;
        while shared.lock().unwrap().saved.get(&0) != Some(&n) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        latencies.push(written.elapsed());
    }
    handle.shutdown();
    assert!(matches!(task.await.unwrap(), RuntimeState::Stopped));
    assert!(shared.lock().unwrap().violations.is_empty());
    latencies
}

#[tokio::test]
async fn a_transactional_batch_is_committed_once_the_source_is_drained_past_the_floor() {
    let latencies = commit_latencies(true).await;
    // Each record is committed at the floor (20 ms) plus a poll, not at max_batch_wait (3 s); the
    // bound is loose for a loaded machine.
    assert!(latencies.iter().all(|l| *l < Duration::from_secs(1)), "{latencies:?}");
    assert!(latencies.iter().all(|l| *l >= Duration::from_millis(20)), "never before the floor: {latencies:?}");
}

#[tokio::test]
async fn without_transactions_a_batch_waits_for_max_batch_wait() {
    // Its records are visible once written: a commit only saves positions, no sooner than needed.
    let latencies = commit_latencies(false).await;
    assert!(latencies.iter().all(|l| *l >= Duration::from_millis(2_900)), "{latencies:?}");
}

#[tokio::test]
async fn a_transactional_catch_up_commits_only_full_batches() {
    // Every poll comes back full (100 records, max_poll_bytes) and takes 5 ms: the source is
    // never drained until its end, so each batch holds max_batch_records though it takes 10
    // polls, well past the floor (20 ms).
    let config = RuntimeConfig { max_batch_wait: Duration::from_secs(30), max_poll_bytes: 1_000, ..small_batches() };
    let (rt, handle, shared) = setup_paced(30_000, Duration::from_millis(5), true, Failure::None, config);
    let state = run_until_saved(rt, &handle, &shared).await;
    assert!(matches!(state, RuntimeState::Stopped), "{state:?}");
    let s = shared.lock().unwrap();
    assert!(s.violations.is_empty(), "{:?}", s.violations);
    assert_eq!(s.committed_batches, vec![1_000; 30], "30 full batches, no early commit");
}
