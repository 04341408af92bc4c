//! A cluster seen from its partitions' leaders: Metadata for the leaders and their epochs, and
//! `read_committed` Fetch requests of raw batches, one per leader, sent together, each in the
//! leader's fetch session ([`crate::session`]).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{FetchRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::batch::{self, Marker};
use crate::session::Session;
use crate::{Batch, ClientOptions, Connection, WireError};

/// Metadata v12: the last version that names topics in the request (v13 adds nothing used here).
const METADATA_VERSION: i16 = 12;
/// Fetch v12: the last version naming topics rather than topic ids (KIP-516 came in v13), with
/// the diverging epoch and current leader of KIP-320/KIP-595.
const FETCH_VERSION: i16 = 12;
/// `isolation_level` of a `read_committed` fetch: up to the last stable offset, with the aborted
/// transactions of the range.
const READ_COMMITTED: i8 = 1;
/// The most a fetch answers in all (bytes), as Kafka's `fetch.max.bytes` default.
const FETCH_MAX_BYTES: i32 = 50 << 20;

/// The leader of a partition, as the last metadata refresh saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leader {
    /// Its broker id.
    pub broker: i32,
    /// Its leader epoch: fetches carry it so a stale leader refuses them (KIP-320).
    pub epoch: i32,
}

/// A partition to fetch, from `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchAt {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// The leader epoch of the last batch read before `offset` (its
    /// [`Batch::partition_leader_epoch`]), or -1 when none was: with it, the leader says when its
    /// log diverged from what was read ([`Fetched::diverging`], KIP-320).
    pub last_fetched_epoch: i32,
}

/// Where the leader's log diverged from the one a partition was read from (after an unclean
/// leader election): the records read from `end_offset` on are not in the leader's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Diverging {
    /// The largest epoch of the leader's log not above the one the fetch named.
    pub epoch: i32,
    /// Where that epoch ends in the leader's log: the offset to read on from.
    pub end_offset: i64,
}

/// A transaction the leader lists as aborted in the fetched range: `producer_id`'s records from
/// `first_offset` up to its abort marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aborted {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// What a fetch returned for one partition.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub topic: String,
    pub partition: i32,
    /// The partition's error (a leader that moved, an offset out of range); no batches with it.
    pub error: Option<ResponseError>,
    pub high_watermark: i64,
    /// The end of what a `read_committed` consumer reads: batches stop before it.
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// The leader's log diverged from what was read before the offset asked (KIP-320); no
    /// batches with it.
    pub diverging: Option<Diverging>,
    pub aborted: Vec<Aborted>,
    /// The whole batches fetched, in log order: the first may start before the offset asked (a
    /// batch is returned whole).
    pub batches: Vec<Batch>,
}

impl Fetched {
    /// The data batches a `read_committed` consumer reads, in log order: without control
    /// batches, and without the batches of each aborted transaction from its first offset up to
    /// its producer's abort marker (the rule of Kafka's Java consumer).
    pub fn committed(&self) -> Vec<&Batch> {
        let mut aborted = self.aborted.clone();
        aborted.sort_by_key(|a| a.first_offset);
        let (mut next, mut open) = (aborted.iter().peekable(), HashSet::new());
        let mut kept = Vec::with_capacity(self.batches.len());
        for b in &self.batches {
            while let Some(a) = next.next_if(|a| a.first_offset <= b.last_offset()) {
                open.insert(a.producer_id);
            }
            if b.is_control() {
                if b.marker() == Some(Marker::Abort) {
                    open.remove(&b.producer_id());
                }
            } else if !(b.is_transactional() && open.contains(&b.producer_id())) {
                kept.push(b);
            }
        }
        kept
    }
}

/// Whether a partition's fetch error means its leader is elsewhere now, or about to be: the
/// metadata is refreshed before the next fetch.
fn leader_moved(error: ResponseError) -> bool {
    matches!(
        error,
        ResponseError::NotLeaderOrFollower
            | ResponseError::FencedLeaderEpoch
            | ResponseError::UnknownLeaderEpoch
            | ResponseError::LeaderNotAvailable
            | ResponseError::UnknownTopicOrPartition
            | ResponseError::KafkaStorageError
    )
}

/// The brokers of one cluster and the leaders of the partitions asked about.
pub struct Cluster {
    bootstrap: Vec<String>,
    options: ClientOptions,
    /// Broker id → `host:port`.
    brokers: HashMap<i32, String>,
    connections: HashMap<i32, Connection>,
    leaders: HashMap<(String, i32), Leader>,
    /// Each leader's fetch session (KIP-227).
    sessions: HashMap<i32, Session>,
    /// Until when each broker holds this client's fetches (KIP-219 quota throttling).
    throttled_until: HashMap<i32, Instant>,
    /// Time (ms) the brokers said they throttled this client's fetches, since the start.
    throttled_ms: u64,
}

impl Cluster {
    /// A cluster reached through `bootstrap` (comma-separated `host:port`), each connection
    /// opened with `options`; it learns its brokers at once. Errors: as [`Self::refresh`].
    pub async fn connect(bootstrap: &str, options: ClientOptions) -> Result<Self, WireError> {
        let mut cluster = Self {
            bootstrap: bootstrap.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
            options,
            brokers: HashMap::new(),
            connections: HashMap::new(),
            leaders: HashMap::new(),
            sessions: HashMap::new(),
            throttled_until: HashMap::new(),
            throttled_ms: 0,
        };
        cluster.refresh(&[]).await?;
        Ok(cluster)
    }

    /// Asks the brokers and the leaders of every partition of `topics`, through the first
    /// bootstrap or known broker that answers; partitions without a leader, or of topics the
    /// cluster does not have, are forgotten. Errors: the last broker's error when none answers;
    /// [`WireError::Broker`] for a topic the client may not describe.
    pub async fn refresh(&mut self, topics: &[&str]) -> Result<(), WireError> {
        let request = MetadataRequest::default().with_allow_auto_topic_creation(false).with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(t.to_string()))))
                })
                .collect(),
        ));
        let mut addrs: Vec<String> = self.brokers.values().cloned().collect();
        addrs.extend(self.bootstrap.iter().cloned());
        let mut failure = None;
        for addr in addrs {
            let answer = async {
                let conn = Connection::open(&addr, &self.options).await?;
                conn.call(&request, METADATA_VERSION).await.map(|answer| (conn, answer))
            };
            let (conn, answer) = match answer.await {
                Ok(answered) => answered,
                Err(e) => {
                    failure = Some(e);
                    continue;
                }
            };
            self.brokers =
                answer.brokers.iter().map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port))).collect();
            self.connections.retain(|id, c| self.brokers.get(id).is_some_and(|a| a == c.addr()));
            for topic in &answer.topics {
                let name = topic.name.as_ref().map(|n| n.0.as_str().to_string()).unwrap_or_default();
                self.leaders.retain(|(t, _), _| *t != name);
                match ResponseError::try_from_code(topic.error_code) {
                    None => {}
                    Some(ResponseError::UnknownTopicOrPartition | ResponseError::LeaderNotAvailable) => continue,
                    Some(error) => {
                        return Err(WireError::Broker {
                            context: format!("metadata of topic {name} from {addr}"),
                            error,
                        })
                    }
                }
                for p in topic.partitions.iter().filter(|p| p.error_code == 0 && p.leader_id.0 >= 0) {
                    let leader = Leader { broker: p.leader_id.0, epoch: p.leader_epoch };
                    self.leaders.insert((name.clone(), p.partition_index), leader);
                }
            }
            // Kept: the broker answered, so later requests to it skip a connect.
            if let Some(id) = self.brokers.iter().find(|(_, a)| **a == addr).map(|(id, _)| *id) {
                if self.connections.get(&id).is_none_or(Connection::is_broken) {
                    self.connections.insert(id, conn);
                }
            }
            return Ok(());
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

    /// Fetches `at` (`read_committed`) from their leaders, one request per leader, sent together:
    /// each leader answers once it has a byte or after `max_wait`, at most `partition_max_bytes`
    /// per partition (a batch larger than that still comes whole).
    ///
    /// Each leader keeps a fetch session (KIP-227): the first fetch names every partition and
    /// answers for each; later ones name only the partitions whose offset (or leader epoch)
    /// changed, and answer only the partitions with news (records, an error, a moved high
    /// watermark or log start). A partition left out of the answer has nothing new at its
    /// offset. A session the leader lost (a restart, another answer lost) answers nothing this
    /// time, and the next fetch is full again.
    ///
    /// A leader that throttles this client (a quota, KIP-219) is not asked again before the time
    /// it said. A partition whose leader moved answers its error, and a leader that did not
    /// answer fails the call; either way the leaders are refreshed before this returns, so the
    /// next fetch asks the new one.
    ///
    /// Errors: [`WireError::NoLeader`] for a partition not refreshed; a leader's request failing
    /// (its connection is dropped when broken, the next fetch opens a new one); a batch that
    /// cannot be forwarded ([`WireError::Batch`]). A partition's own error comes back in its
    /// [`Fetched::error`].
    pub async fn fetch(
        &mut self,
        at: &[FetchAt],
        max_wait: Duration,
        partition_max_bytes: i32,
    ) -> Result<Vec<Fetched>, WireError> {
        let mut by_leader: HashMap<i32, Vec<(&FetchAt, i32)>> = HashMap::new();
        for a in at {
            let leader = self.known_leader(&a.topic, a.partition)?;
            by_leader.entry(leader.broker).or_default().push((a, leader.epoch));
        }
        let max_wait_ms = i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX);
        let mut asking = Vec::with_capacity(by_leader.len());
        let mut failure = None;
        for (broker, wanted) in by_leader {
            let Some(conn) = self.connection_or_failure(broker, &mut failure).await else { continue };
            let base = FetchRequest::default()
                .with_max_wait_ms(max_wait_ms)
                .with_min_bytes(1)
                .with_max_bytes(FETCH_MAX_BYTES)
                .with_isolation_level(READ_COMMITTED);
            let asked = self.sessions.entry(broker).or_default().ask(base, &wanted, partition_max_bytes);
            let throttled_until = self.throttled_until.get(&broker).copied();
            asking.push(async move {
                // A throttled broker holds the connection (KIP-219): a request sent now would wait
                // in its socket, its timeout running.
                if let Some(until) = throttled_until {
                    tokio::time::sleep_until(until.into()).await;
                }
                let answer = conn.call(&asked.request, FETCH_VERSION).await;
                (broker, conn, asked, answer)
            });
        }
        let mut fetched = Vec::new();
        for (broker, conn, asked, answer) in futures::future::join_all(asking).await {
            let session = self.sessions.entry(broker).or_default();
            let answer = match answer.and_then(|a| conn.check(a.error_code, "Fetch").map(|()| a)) {
                Ok(answer) => {
                    session.answered(asked, answer.session_id);
                    if answer.throttle_time_ms > 0 {
                        let ms = answer.throttle_time_ms as u64;
                        self.throttled_until.insert(broker, Instant::now() + Duration::from_millis(ms));
                        self.throttled_ms += ms;
                    }
                    answer
                }
                // The broker lost the session (a restart, an eviction): the next fetch is full.
                Err(WireError::Broker {
                    error: ResponseError::FetchSessionIdNotFound | ResponseError::InvalidFetchSessionEpoch,
                    ..
                }) => {
                    session.reset();
                    continue;
                }
                Err(e) => {
                    // Whether the broker took this epoch is unknown: start over.
                    session.reset();
                    failure.get_or_insert(e);
                    continue;
                }
            };
            for topic in answer.responses {
                let name = topic.topic.0.as_str().to_string();
                for p in topic.partitions {
                    let batches = match p.records {
                        Some(records) => batch::split(records).map_err(|source| WireError::Batch {
                            topic: name.clone(),
                            partition: p.partition_index,
                            source,
                        })?,
                        None => Vec::new(),
                    };
                    fetched.push(Fetched {
                        topic: name.clone(),
                        partition: p.partition_index,
                        error: ResponseError::try_from_code(p.error_code),
                        high_watermark: p.high_watermark,
                        last_stable_offset: p.last_stable_offset,
                        log_start_offset: p.log_start_offset,
                        diverging: (p.diverging_epoch.epoch >= 0).then_some(Diverging {
                            epoch: p.diverging_epoch.epoch,
                            end_offset: p.diverging_epoch.end_offset,
                        }),
                        aborted: p
                            .aborted_transactions
                            .unwrap_or_default()
                            .iter()
                            .map(|a| Aborted { producer_id: a.producer_id.0, first_offset: a.first_offset })
                            .collect(),
                        batches,
                    });
                }
            }
        }
        // Leaders that moved, or a leader that did not answer: known anew before the next
        // fetch, which then goes to the new leader.
        let moved: HashSet<&str> = match failure {
            Some(_) => at.iter().map(|a| a.topic.as_str()).collect(),
            None => fetched.iter().filter(|f| f.error.is_some_and(leader_moved)).map(|f| f.topic.as_str()).collect(),
        };
        let moved: Vec<String> = moved.into_iter().map(str::to_string).collect();
        self.refresh_moved(&moved).await;
        match failure {
            Some(e) => Err(e),
            None => Ok(fetched),
        }
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
        self.throttled_ms
    }

    /// The fetch session open with `broker`: its id and the epoch of the next fetch; none when
    /// the next fetch to it is full.
    pub fn session(&self, broker: i32) -> Option<(i32, i32)> {
        self.sessions.get(&broker).and_then(Session::open)
    }

    /// The open connection to `broker`, or a new one when the old one broke or there was none.
    /// Errors: `broker` is not in the metadata; [`Connection::open`]'s.
    pub(crate) async fn connection(&mut self, broker: i32) -> Result<Connection, WireError> {
        if let Some(conn) = self.connections.get(&broker).filter(|c| !c.is_broken()) {
            return Ok(conn.clone());
        }
        let addr = self.brokers.get(&broker).ok_or_else(|| WireError::Io {
            addr: format!("broker {broker}"),
            source: std::io::Error::other("not in the cluster's metadata"),
        })?;
        let conn = Connection::open(addr, &self.options).await?;
        self.connections.insert(broker, conn.clone());
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
