//! A cluster seen from its partitions' leaders: Metadata for the leaders, their epochs and the
//! topics' ids, and `read_committed` Fetch requests of raw batches, one per leader, each leader
//! on its own ([`crate::fetch`]) and in its fetch session ([`crate::session`]).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::MetadataRequest;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::conn::{ClientOptions, Connection};
use crate::connections::{connection_of, Route};
use crate::error::WireError;
use crate::fetch::{FetchRound, Fetches};
use crate::fetched::FetchAt;
use crate::names::topic_name;

/// How often the leaders of partitions led by a broker whose fetch is overdue are asked again.
const OVERDUE_REFRESH: Duration = Duration::from_secs(1);

/// Metadata v12: the last version that names topics in the request (v13 adds nothing used here);
/// it answers each topic's id (v10+).
const METADATA_VERSION: i16 = 12;

/// The leader of a partition, as the last metadata refresh saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leader {
    /// Its broker id.
    pub broker: i32,
    /// Its leader epoch: fetches carry it so a stale leader refuses them (KIP-320).
    pub epoch: i32,
}

/// The brokers of one cluster and the leaders of the partitions asked about.
pub struct Cluster {
    bootstrap: Vec<String>,
    options: ClientOptions,
    /// Connections kept to each broker ([`crate::Connections`], decided at connect).
    per_broker: usize,
    /// Whether the first answers took 15 ms or more (another region, [`crate::is_far`]).
    far: bool,
    /// Broker id → `host:port`.
    brokers: HashMap<i32, String>,
    connections: HashMap<Route, Connection>,
    leaders: HashMap<(String, i32), Leader>,
    /// Each topic's id (KIP-516) as last refreshed.
    ids: HashMap<String, Uuid>,
    /// Topics the cluster answered it does not have, since when (first answer of a run of them).
    missing: HashMap<String, Instant>,
    fetches: Fetches,
    /// When the leaders of an overdue leader's partitions were last refreshed.
    overdue_refreshed: Option<Instant>,
}

impl Cluster {
    /// A cluster reached through `bootstrap` (comma-separated `host:port`), each connection
    /// opened with `options`; it learns its brokers at once, and how many connections to keep
    /// to each from how long that took. Errors: as [`Self::refresh`].
    pub async fn connect(bootstrap: &str, options: ClientOptions) -> Result<Self, WireError> {
        let mut cluster = Self {
            bootstrap: bootstrap.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
            options,
            per_broker: 1,
            far: false,
            brokers: HashMap::new(),
            connections: HashMap::new(),
            leaders: HashMap::new(),
            ids: HashMap::new(),
            missing: HashMap::new(),
            fetches: Fetches::default(),
            overdue_refreshed: None,
        };
        let round_trip = cluster.refresh(&[]).await?;
        cluster.per_broker = cluster.options.connections.per_broker(round_trip);
        cluster.far = crate::is_far(round_trip);
        Ok(cluster)
    }

    /// Whether the cluster's quickest answer at connect took 15 ms ([`crate::is_far`])
    /// or more: it is in another region, and a request carries more per round trip.
    pub fn is_far(&self) -> bool {
        self.far
    }

    /// Connections kept to each broker ([`crate::Connections`]).
    pub fn connections_per_broker(&self) -> usize {
        self.per_broker
    }

    /// The connections open now, to every broker together.
    pub fn connections_open(&self) -> usize {
        self.connections.values().filter(|c| !c.is_broken()).count()
    }

    /// The connection of `broker` that `topic`/`partition`'s requests go through
    /// ([`connection_of`]).
    pub(crate) fn route(&self, broker: i32, topic: &str, partition: i32) -> Route {
        Route { broker, index: connection_of(topic, partition, self.per_broker) }
    }

    /// Asks the brokers, and the leaders and id of every partition of `topics`, through the first
    /// known broker or bootstrap address that answers (brokers with a working connection first,
    /// through it; brokers whose fetches failed or are overdue last); partitions without a
    /// leader, or of topics the cluster does not have, are forgotten. Returns the quickest of
    /// the broker's answers to the connection's first request and to this one (a round trip).
    /// Errors: the last broker's error when none answers;
    /// [`WireError::Broker`] for a topic the client may not describe.
    pub async fn refresh(&mut self, topics: &[&str]) -> Result<Duration, WireError> {
        let request = MetadataRequest::default().with_allow_auto_topic_creation(false).with_topics(Some(
            topics.iter().map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t)))).collect(),
        ));
        // Brokers with a connection that works first, suspect ones (a fetch failed or overdue:
        // down, frozen, cut off) last, so a broker that holds a request never holds a refresh.
        let live = |id: &i32| self.connections.get(&Route::first(*id)).filter(|c| !c.is_broken()).cloned();
        let mut brokers: Vec<(i32, String)> = self.brokers.iter().map(|(id, a)| (*id, a.clone())).collect();
        brokers.sort_by_key(|(id, _)| (self.fetches.suspect(*id), live(id).is_none()));
        let mut asks: Vec<(String, Option<Connection>)> =
            brokers.into_iter().map(|(id, addr)| (addr, live(&id))).collect();
        asks.extend(self.bootstrap.iter().map(|addr| (addr.clone(), None)));
        let mut failure = None;
        for (addr, conn) in asks {
            let answer = async {
                let conn = match conn {
                    Some(conn) => conn,
                    None => Connection::open(&addr, &self.options).await?,
                };
                let asked = Instant::now();
                let answer = conn.call(&request, METADATA_VERSION).await?;
                Ok::<_, WireError>((asked.elapsed().min(conn.round_trip()), conn, answer))
            };
            let (round_trip, conn, answer) = match answer.await {
                Ok(answered) => answered,
                Err(e) => {
                    failure = Some(e);
                    continue;
                }
            };
            self.brokers =
                answer.brokers.iter().map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port))).collect();
            self.connections.retain(|route, c| self.brokers.get(&route.broker).is_some_and(|a| a == c.addr()));
            for topic in &answer.topics {
                let name = topic.name.as_ref().map(|n| n.0.as_str().to_string()).unwrap_or_default();
                self.leaders.retain(|(t, _), _| *t != name);
                self.ids.remove(&name);
                match ResponseError::try_from_code(topic.error_code) {
                    None => {
                        self.missing.remove(&name);
                    }
                    Some(ResponseError::UnknownTopicOrPartition) => {
                        self.missing.entry(name).or_insert_with(Instant::now);
                        continue;
                    }
                    // The cluster has the topic (one being created answers so).
                    Some(ResponseError::LeaderNotAvailable) => {
                        self.missing.remove(&name);
                        continue;
                    }
                    Some(error) => {
                        return Err(WireError::Broker {
                            context: format!("metadata of topic {name} from {addr}"),
                            error,
                        })
                    }
                }
                if !topic.topic_id.is_nil() {
                    self.ids.insert(name.clone(), topic.topic_id);
                }
                for p in topic.partitions.iter().filter(|p| p.error_code == 0 && p.leader_id.0 >= 0) {
                    let leader = Leader { broker: p.leader_id.0, epoch: p.leader_epoch };
                    self.leaders.insert((name.clone(), p.partition_index), leader);
                }
            }
            // Kept: the broker answered, so later requests to it skip a connect.
            if let Some(id) = self.brokers.iter().find(|(_, a)| **a == addr).map(|(id, _)| *id) {
                if self.connections.get(&Route::first(id)).is_none_or(Connection::is_broken) {
                    self.connections.insert(Route::first(id), conn);
                }
            }
            return Ok(round_trip);
        }
        Err(failure.unwrap_or(WireError::NoBroker))
    }

    /// The partitions of `topic` with a leader as last refreshed, in order.
    pub fn partitions(&self, topic: &str) -> Vec<i32> {
        let mut partitions: Vec<i32> = self.leaders.keys().filter(|(t, _)| t == topic).map(|(_, p)| *p).collect();
        partitions.sort_unstable();
        partitions
    }

    /// [`Self::leader`], or [`WireError::NoLeader`] for a partition not refreshed.
    pub(crate) fn known_leader(&self, topic: &str, partition: i32) -> Result<Leader, WireError> {
        self.leader(topic, partition).ok_or_else(|| WireError::NoLeader { topic: topic.to_string(), partition })
    }

    /// The leader of `topic`/`partition` as last refreshed.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<Leader> {
        self.leaders.get(&(topic.to_string(), partition)).copied()
    }

    /// Since when every refresh that asked for `topic` answered that the cluster does not have it
    /// (`None` once one found it, or none asked).
    pub(crate) fn missing_since(&self, topic: &str) -> Option<Instant> {
        self.missing.get(topic).copied()
    }

    /// The id of `topic` (KIP-516) as last refreshed.
    pub fn topic_id(&self, topic: &str) -> Option<Uuid> {
        self.ids.get(topic).copied()
    }

    /// Fetches `at` (`read_committed`) from their leaders, each leader on its own: a request goes
    /// to every leader of `at` with none out and no backoff running, each partition named by its
    /// topic's id where the leader speaks Fetch v13 (a nil [`FetchAt::topic_id`] takes the
    /// metadata's); then this waits for the first request out to end, at most `max_wait` and
    /// 2 s, and returns every answer in by then. A leader still answering keeps its request out
    /// for a later call, and its partitions are not asked again meanwhile, unless a refresh finds
    /// them led elsewhere (the leaders of a leader overdue by 2 s are asked each second); each
    /// leader answers once it has a byte or after `max_wait`, at most `partition_max_bytes` per
    /// partition (a batch larger than that still comes whole).
    ///
    /// Each leader keeps a fetch session (KIP-227): the first fetch names every partition and
    /// answers for each; later ones name only the partitions whose offset (or leader epoch)
    /// changed, and answer only the partitions with news (records, an error, a moved high
    /// watermark or log start). A partition left out of the answer has nothing new at its
    /// offset. A session the leader lost (a restart, another answer lost) answers nothing this
    /// time, and the next fetch is full again.
    ///
    /// A leader that throttles this client (a quota, KIP-219) is not asked again before the time
    /// it said. A leader whose request failed is in [`FetchRound::brokers`] with its error and is
    /// not asked again before its backoff (100 ms doubling to 5 s) runs out. Partitions without
    /// a known leader are not asked. Where a leader moved, did not answer or has no partition
    /// known, the leaders are refreshed before this returns, so the next fetch asks the new one.
    ///
    /// Errors: a leader's failure that asking again repeats (TLS, SASL, a version it does not
    /// speak); a batch that cannot be forwarded ([`WireError::Batch`]). A partition's own error
    /// comes back in its [`crate::Fetched::error`].
    pub async fn fetch(
        &mut self,
        at: &[FetchAt],
        max_wait: Duration,
        partition_max_bytes: i32,
    ) -> Result<FetchRound, WireError> {
        let mut by_route: HashMap<Route, Vec<(FetchAt, i32)>> = HashMap::new();
        let mut unled = HashSet::new();
        for a in at {
            let Some(leader) = self.leader(&a.topic, a.partition) else {
                unled.insert(a.topic.clone());
                continue;
            };
            let route = self.route(leader.broker, &a.topic, a.partition);
            if self.fetches.ready(route) {
                let mut a = a.clone();
                if a.topic_id.is_nil() {
                    a.topic_id = self.topic_id(&a.topic).unwrap_or_default();
                }
                by_route.entry(route).or_default().push((a, leader.epoch));
            }
        }
        for (route, wanted) in &by_route {
            let wanted: Vec<(&FetchAt, i32)> = wanted.iter().map(|(a, e)| (a, *e)).collect();
            let reach = self.reach(*route);
            self.fetches.send(*route, reach, &wanted, max_wait, partition_max_bytes);
        }
        let (round, opened, moved) = self.fetches.next(max_wait).await?;
        for (route, conn) in opened {
            self.keep(route, conn);
        }
        let mut refresh: HashSet<String> = moved.into_iter().chain(unled).collect();
        // A leader that holds its request past its time (frozen, cut off): its partitions may
        // have a new leader by now, which the next call asks while the old request stays out.
        let overdue = self.fetches.overdue();
        if !overdue.is_empty() && self.overdue_refreshed.is_none_or(|t| t.elapsed() >= OVERDUE_REFRESH) {
            self.overdue_refreshed = Some(Instant::now());
            let led = self.leaders.iter().filter(|(_, l)| overdue.contains(&l.broker)).map(|((t, _), _)| t.clone());
            refresh.extend(led.collect::<Vec<_>>());
        }
        self.refresh_moved(&refresh.into_iter().collect::<Vec<_>>()).await;
        Ok(round)
    }

    /// Refreshes the leaders of `topics`, if any, after a leader did not answer or said it is
    /// not the leader; a failed refresh leaves the old ones, and the next call tries again.
    pub(crate) async fn refresh_moved(&mut self, topics: &[String]) {
        if !topics.is_empty() {
            self.refresh(&topics.iter().map(String::as_str).collect::<Vec<_>>()).await.ok();
        }
    }

    /// Time (ms) the brokers throttled this client's fetches (quotas, KIP-219), since the start.
    pub fn throttled_ms(&self) -> u64 {
        self.fetches.throttled_ms
    }

    /// The fetch session open on `broker`'s first connection: its id and the epoch of the next
    /// fetch; none when the next fetch on it is full.
    pub fn session(&self, broker: i32) -> Option<(i32, i32)> {
        self.fetches.session(Route::first(broker))
    }

    /// How to reach `route` without waiting here: its open connection, if one works, else the
    /// broker's address and the options to open one with (a task of its own opens it, so a broker
    /// that does not answer holds only that task, [`Self::keep`] keeping what it opened).
    pub(crate) fn reach(&self, route: Route) -> (Option<Connection>, String, ClientOptions) {
        let conn = self.connections.get(&route).filter(|c| !c.is_broken()).cloned();
        let addr = self.brokers.get(&route.broker).cloned().unwrap_or_else(|| format!("broker {}", route.broker));
        (conn, addr, self.options.clone())
    }

    /// Keeps `conn`, opened for `route` by a task ([`Self::reach`]), unless the broker has moved
    /// since.
    pub(crate) fn keep(&mut self, route: Route, conn: Connection) {
        if self.brokers.get(&route.broker).is_some_and(|a| a == conn.addr()) {
            self.connections.insert(route, conn);
        }
    }

    /// The open first connection to `broker`, or a new one when the old one broke or there was
    /// none. Errors: `broker` is not in the metadata; [`Connection::open`]'s.
    pub(crate) async fn connection(&mut self, broker: i32) -> Result<Connection, WireError> {
        if let Some(conn) = self.connections.get(&Route::first(broker)).filter(|c| !c.is_broken()) {
            return Ok(conn.clone());
        }
        let addr = self.brokers.get(&broker).ok_or_else(|| WireError::Io {
            addr: format!("broker {broker}"),
            source: std::io::Error::other("not in the cluster's metadata"),
        })?;
        let conn = Connection::open(addr, &self.options).await?;
        self.connections.insert(Route::first(broker), conn.clone());
        Ok(conn)
    }

    /// [`Self::connection`], or none with its error kept in `failure` (the first one only), so
    /// the other leaders of a call are still asked.
    pub(crate) async fn connection_or_failure(
        &mut self,
        broker: i32,
        failure: &mut Option<WireError>,
    ) -> Option<Connection> {
        match self.connection(broker).await {
            Ok(conn) => Some(conn),
            Err(e) => {
                failure.get_or_insert(e);
                None
            }
        }
    }

    /// The ids of the brokers in the last metadata.
    pub(crate) fn broker_ids(&self) -> Vec<i32> {
        self.brokers.keys().copied().collect()
    }

    /// The timeout each request waits for its answer.
    pub(crate) fn timeout(&self) -> Duration {
        self.options.timeout
    }
}
