//! The fetches out to a cluster's leaders, each broker on its own: a request per connection to a
//! leader ([`Route`]), at most one out at a time on each, answered when that leader answers. A leader that fails or is slow holds
//! only its own partitions: the others' answers are taken as they come, and a failed leader is
//! asked again after a backoff of its own (100 ms doubling to 5 s).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use backon::ExponentialBackoff;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;

use tokio::task::JoinHandle;

use crate::conn::{ClientOptions, Connection};
use crate::connections::Route;
use crate::error::WireError;
use crate::fetched::{FetchAt, Fetched};
use crate::retry::doubling;
use crate::session::{Asked, Session};

/// Fetch v13: topics named by id (KIP-516), with the diverging epoch and current leader of
/// KIP-320/KIP-595. A broker older than Kafka 3.1 is asked v12, by name.
const FETCH_VERSION: i16 = 13;
/// `isolation_level` of a `read_committed` fetch: up to the last stable offset, with the aborted
/// transactions of the range.
const READ_COMMITTED: i8 = 1;
/// The most a fetch answers in all (bytes), as Kafka's `fetch.max.bytes` default.
const FETCH_MAX_BYTES: i32 = 50 << 20;
/// First and longest wait before a leader whose request failed is asked again.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How long past its `max_wait` a leader may take to answer before it is suspect (frozen, or
/// cut off without the connection failing): its partitions' leaders are then asked anew.
const ANSWER_GRACE: Duration = Duration::from_secs(2);

/// What one fetch call gave: the partitions answered, and how each broker asked fared.
#[derive(Debug, Default)]
pub struct FetchRound {
    pub fetched: Vec<Fetched>,
    /// Each broker whose request ended in this call, by id (once per connection to it):
    /// answered (`Ok`), or failed, its partitions asked again after its backoff while the other
    /// brokers' answers are kept.
    pub brokers: Vec<(i32, Result<(), WireError>)>,
}

/// A request that ended: its route, the connection (opened for it if there was none), what was
/// asked, and the answer.
struct Ended {
    route: Route,
    conn: Option<Connection>,
    asked: Asked,
    answer: Result<FetchResponse, WireError>,
}

/// Each connection's fetch session, throttle, backoff and request out, by [`Route`].
#[derive(Default)]
pub(crate) struct Fetches {
    sessions: HashMap<Route, Session>,
    /// Until when each connection's broker holds this client's fetches (KIP-219 quota
    /// throttling).
    throttled_until: HashMap<Route, Instant>,
    /// Time (ms) the brokers said they throttled this client's fetches, since the start.
    pub(crate) throttled_ms: u64,
    /// Routes whose last request failed: not asked before the instant; the next failure's wait.
    backoff: HashMap<Route, (Instant, ExponentialBackoff)>,
    /// The requests out, each a task of its own (so the cluster stays `Sync`), aborted on drop.
    out: FuturesUnordered<JoinHandle<Ended>>,
    /// The routes with a request out, each with when its answer is due (`max_wait` and
    /// [`ANSWER_GRACE`] after it was sent).
    asking: HashMap<Route, Instant>,
}

impl Fetches {
    /// Whether `route` may be asked now: no request of its out, no backoff running.
    pub(crate) fn ready(&self, route: Route) -> bool {
        !self.asking.contains_key(&route) && self.backoff.get(&route).is_none_or(|(until, _)| *until <= Instant::now())
    }

    /// Whether `broker` is suspect: the last request of one of its connections failed and it has
    /// not answered since, or one's request out is overdue.
    pub(crate) fn suspect(&self, broker: i32) -> bool {
        let now = Instant::now();
        self.backoff.keys().any(|r| r.broker == broker)
            || self.asking.iter().any(|(r, due)| r.broker == broker && *due < now)
    }

    /// The brokers with a request out overdue.
    pub(crate) fn overdue(&self) -> HashSet<i32> {
        let now = Instant::now();
        self.asking.iter().filter(|(_, due)| **due < now).map(|(r, _)| r.broker).collect()
    }

    /// Sends `wanted` (each with its leader epoch) on `route` in its session, through `conn` or
    /// a connection opened to `addr`; the answer is taken by [`Self::next`].
    pub(crate) fn send(
        &mut self,
        route: Route,
        (conn, addr, options): (Option<Connection>, String, ClientOptions),
        wanted: &[(&FetchAt, i32)],
        max_wait: Duration,
        partition_max_bytes: i32,
    ) {
        let base = FetchRequest::default()
            .with_max_wait_ms(i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX))
            .with_min_bytes(1)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_isolation_level(READ_COMMITTED);
        let asked = self.sessions.entry(route).or_default().ask(base, wanted, partition_max_bytes);
        let throttled_until = self.throttled_until.get(&route).copied();
        self.asking.insert(route, Instant::now() + max_wait + ANSWER_GRACE);
        self.out.push(tokio::spawn(async move {
            // A throttled broker holds the connection (KIP-219): a request sent now would wait
            // in its socket, its timeout running.
            if let Some(until) = throttled_until {
                tokio::time::sleep_until(until.into()).await;
            }
            let conn = match conn {
                Some(conn) => Ok(conn),
                None => Connection::open(&addr, &options).await,
            };
            let conn = match conn {
                Ok(conn) => conn,
                Err(e) => return Ended { route, conn: None, asked, answer: Err(e) },
            };
            let answer = conn.call(&asked.request, FETCH_VERSION).await;
            let answer = answer.and_then(|a| conn.check(a.error_code, "Fetch").map(|()| a));
            Ended { route, conn: Some(conn), asked, answer }
        }));
    }

    /// Waits for the first request out to end (or, with none out, for the first backoff to run
    /// out), at most `max_wait` and [`ANSWER_GRACE`] (a request not answered by then stays out,
    /// its broker overdue), then takes every other that ended meanwhile. Returns the round, the
    /// connections opened for it by route, and the topics whose leader may have moved (to refresh). Errors: a broker's failure that asking
    /// again repeats (TLS, SASL, a version it does not speak); a batch that cannot be read.
    pub(crate) async fn next(
        &mut self,
        max_wait: Duration,
    ) -> Result<(FetchRound, Vec<(Route, Connection)>, HashSet<String>), WireError> {
        let mut ended = Vec::new();
        if self.out.is_empty() {
            let first_retry = self.backoff.values().map(|(until, _)| *until).min();
            let wait = first_retry.map_or(max_wait, |t| t.saturating_duration_since(Instant::now()).min(max_wait));
            tokio::time::sleep(wait).await;
        } else if let Ok(Some(e)) = tokio::time::timeout(max_wait + ANSWER_GRACE, self.out.next()).await {
            ended.push(e);
            while let Some(Some(e)) = self.out.next().now_or_never() {
                ended.push(e);
            }
        }
        // A request's task ends by finishing (it is aborted only with `self`); should one panic,
        // its broker is free again once nothing else is out.
        let ended = ended.into_iter().filter_map(Result::ok);
        if self.out.is_empty() {
            self.asking.clear();
        }
        let (mut round, mut opened, mut moved) = (FetchRound::default(), Vec::new(), HashSet::new());
        for Ended { route, conn, asked, answer } in ended {
            self.asking.remove(&route);
            let session = self.sessions.entry(route).or_default();
            let answer = match answer {
                Ok(answer) => answer,
                // The broker lost the session (a restart, an eviction): the next fetch is full.
                Err(WireError::Broker {
                    error: ResponseError::FetchSessionIdNotFound | ResponseError::InvalidFetchSessionEpoch,
                    ..
                }) => {
                    session.reset();
                    continue;
                }
                Err(e) if e.is_retriable() => {
                    // Whether the broker took this epoch is unknown: start over.
                    session.reset();
                    let (until, waits) = self
                        .backoff
                        .entry(route)
                        .or_insert_with(|| (Instant::now(), doubling(BACKOFF_MIN, BACKOFF_MAX)));
                    *until = Instant::now() + waits.next().unwrap_or(BACKOFF_MAX);
                    moved.extend(asked.topics());
                    round.brokers.push((route.broker, Err(e)));
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.backoff.remove(&route);
            if let Some(conn) = conn {
                opened.push((route, conn));
            }
            if answer.throttle_time_ms > 0 {
                let ms = answer.throttle_time_ms as u64;
                self.throttled_until.insert(route, Instant::now() + Duration::from_millis(ms));
                self.throttled_ms += ms;
            }
            for topic in answer.responses {
                let name = topic.topic.0.as_str();
                for p in topic.partitions {
                    let Some((name, offset)) = asked.asked(topic.topic_id, name, p.partition_index) else { continue };
                    let fetched = Fetched::of_answer(name, topic.topic_id, offset, p)?;
                    if fetched.error.is_some_and(leader_moved) {
                        moved.insert(fetched.topic.clone());
                    }
                    round.fetched.push(fetched);
                }
            }
            session.answered(asked, answer.session_id);
            round.brokers.push((route.broker, Ok(())));
        }
        Ok((round, opened, moved))
    }

    /// The fetch session open on `route`: its id and the epoch of the next fetch.
    pub(crate) fn session(&self, route: Route) -> Option<(i32, i32)> {
        self.sessions.get(&route).and_then(Session::open)
    }
}

impl Drop for Fetches {
    fn drop(&mut self) {
        for request in self.out.iter() {
            request.abort();
        }
    }
}

/// Whether a partition's fetch error means its leader is elsewhere now, or about to be, or its
/// topic changed: the metadata is refreshed before the next fetch.
fn leader_moved(error: ResponseError) -> bool {
    matches!(
        error,
        ResponseError::NotLeaderOrFollower
            | ResponseError::FencedLeaderEpoch
            | ResponseError::UnknownLeaderEpoch
            | ResponseError::LeaderNotAvailable
            | ResponseError::UnknownTopicOrPartition
            | ResponseError::KafkaStorageError
            | ResponseError::UnknownTopicId
            | ResponseError::InconsistentTopicId
    )
}
